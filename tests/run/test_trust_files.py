"""Attack: every file published with a run is bound to its signed result (issue 27, item 3).

A real run (a shell agent that submits and promotes a trivial bundle) is published; then each
file of its folder is edited the way a forger would (a line added to agent.log, the transcript
rewritten, a file planted, a candidate archive swapped): `runs validate` must refuse each, and
pass the untouched folder (an archive kept out of git is only a note).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from click.testing import CliRunner

from tests.run.conftest import MAKE_BUNDLE, ShellAgent, SpecFactory
from toolkit.cli import cli
from toolkit.results.model import RunResult
from toolkit.run.orchestrate import execute_run


def _validate(path: Path) -> tuple[int, str]:
    done = CliRunner().invoke(cli, ["runs", "validate", str(path)])
    return done.exit_code, done.output


def _append(path: Path, text: bytes) -> None:
    with path.open("ab") as f:
        f.write(text)


def test_every_published_file_is_bound_to_the_signed_result(
    make_spec: SpecFactory, tmp_path: Path
) -> None:
    script = f"""{MAKE_BUNDLE}
echo "working on it"
runner submit bundles/triv
runner promote c001
"""
    spec = make_spec(ShellAgent(script), budget=60, per_call=30, reserved=5)
    result: RunResult = execute_run(spec)
    assert result.status == "valid", result.status_reason
    assert result.files is not None
    run = f"{result.run_id}/"
    bound = {k.removeprefix(run) for k in result.files}
    assert {"agent.log", "transcript.txt", "audit.jsonl", "history.jsonl"} <= bound, bound
    assert "candidates/c001.tar.gz" in bound
    file = spec.results_dir / "demo-cpu-3" / f"{result.run_id}.json"
    code, output = _validate(file)
    assert code == 0, output
    assert (
        file.parent.joinpath(result.run_id, "agent.log")
        .read_text()
        .rstrip()
        .endswith(f"result: valid {result.score.percent:.1f}%")
    )  # the last line: nothing is written after the file is hashed

    attacks: dict[str, Callable[[Path], None]] = {
        "agent.log": lambda f: _append(f / "agent.log", b"[   1.0s] reference check FAILED\n"),
        "transcript": lambda f: (f / "transcript.txt").write_text("a forged transcript\n"),
        "planted": lambda f: (f / "notes.txt").write_text("added later\n"),
        "archive": lambda f: _append(f / "candidates" / "c001.tar.gz", b"\0"),
        "removed": lambda f: (f / "agent.log").unlink(),
        "link": lambda f: (f / "extra").symlink_to("/etc/hostname"),
    }
    pristine = tmp_path / "pristine"
    shutil.copytree(spec.results_dir, pristine, symlinks=True)
    folder = spec.results_dir / "demo-cpu-3" / result.run_id
    for name, attack in attacks.items():
        shutil.rmtree(spec.results_dir)
        shutil.copytree(pristine, spec.results_dir, symlinks=True)
        attack(folder)
        code, output = _validate(file)
        assert code == 1, (name, output)
        assert str(folder) in output, (name, output)

    # The candidates/ folder kept out of git (as .gitignore does) is a note, not an error: the
    # archive and its public questions file.
    shutil.rmtree(spec.results_dir)
    shutil.copytree(pristine, spec.results_dir, symlinks=True)
    shutil.rmtree(folder / "candidates")
    code, output = _validate(file)
    assert code == 0 and "2 files of candidates/ not here" in output, output
