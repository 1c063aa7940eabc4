"""What a new user meets first, through the real `toolkit` command (issue 12, items 7-15).

Where terminal detection matters (plain output when piped) the command runs as a real
subprocess with its output going to pipes; a pseudo-terminal checks the other side.
"""

from __future__ import annotations

import json
import os
import pty
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from toolkit.agents.scripted import BASELINE_MODEL
from toolkit.cli import cli

REPO = Path(__file__).resolve().parents[2]
TOOLKIT = str(Path(sys.executable).parent / "toolkit")
LONG = "a-model-name-that-is-much-longer-than-eighty-columns-so-that-wrapping-would-split-it-x"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A state folder of this module's own: what the commands leave in it is checked."""
    return tmp_path_factory.mktemp("ari-home")


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "FORCE_COLOR", "CI")}
    # A terminal type that would tempt a styling library; stdout is still a pipe.
    return {**env, "ARI_HOME": str(home), "TERM": "xterm-256color", **extra}


def _toolkit(home: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TOOLKIT, *args],
        env=_env(home),
        cwd=cwd or REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _leftovers(home: Path) -> list[str]:
    """What a finished or refused `toolkit run` must not leave in the state folder."""
    runs = list((home / "runs").glob("*")) if (home / "runs").exists() else []
    return sorted(str(p) for p in [*runs, *home.glob("prepared-data-*")])


def _plain(text: str) -> None:
    assert "\x1b" not in text, "ANSI escape in output that is not a terminal"


@pytest.fixture(scope="module")
def worktree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git working tree with a results folder (like the repository's own)."""
    root = tmp_path_factory.mktemp("checkout") / "a-checkout-with-a-rather-long-folder-name"
    (root / "results").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    shutil.copy(REPO / "results" / "tracks.json", root / "results" / "tracks.json")
    return root


@pytest.fixture(scope="module")
def short_run(home: Path, worktree: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    """One real scripted run (a 10 s budget: too short to train, so it ends `failed`), written
    by accident into a git working tree's results/, output piped."""
    done = _toolkit(
        home, "run", "--agent", "scripted", "--track", "demo-cpu-3", "--seed", "0",
        "--budget", "10", "--device", "cpu", "--quiet", "--results", "results", cwd=worktree,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (result,) = (worktree / "results" / "demo-cpu-3").glob("*.json")
    return done, result


# --- item 12: the scripted agent's row is named for what it is ----------------------------------


def test_scripted_runs_are_recorded_as_the_baseline(short_run: tuple) -> None:
    _, path = short_run
    result = json.loads(path.read_text())
    assert result["model"] == BASELINE_MODEL == "scripted-baseline"
    assert f"-{BASELINE_MODEL}-s0-" in result["run_id"]


def test_the_scripted_agent_takes_no_other_model_name() -> None:
    done = CliRunner().invoke(cli, ["run", "--agent", "scripted", "--model", "none", "--seed", "0"])
    assert done.exit_code == 2
    assert "--agent scripted uses no model" in done.output and "scripted-baseline" in done.output


def test_docs_and_demo_name_the_baseline() -> None:
    for path in ["README.md", "scripts/demo.sh", "toolkit/cli.py", "toolkit/commands/run.py"]:
        text = (REPO / path).read_text(encoding="utf-8")
        assert "--model none" not in text, path
    assert "scripted-baseline" in (REPO / "README.md").read_text(encoding="utf-8")


# --- item 13: examples use a scratch folder; a run in a git tree says where it went -------------


def test_help_examples_never_write_into_the_repository() -> None:
    for args in (["-h"], ["run", "-h"]):
        done = CliRunner().invoke(cli, args)
        text = done.output
        calls = [line for line in text.splitlines() if "toolkit run " in line]
        assert calls, (args, done.exit_code, repr(done.exception), text[-3000:])
        for line in calls:
            joined = line + text.split(line, 1)[1].split("\n", 2)[1]  # with its continuation
            assert re.search(r"--results /tmp/\S+", joined), line


def test_a_run_into_a_git_tree_says_where_it_went(short_run: tuple, worktree: Path) -> None:
    done, path = short_run
    assert f"result: {path}" in done.stdout.splitlines()  # absolute, whole, on its own line
    notes = [line for line in done.stderr.splitlines() if line.startswith("note:")]
    assert notes, done.stderr
    assert "demo-track run is written into the git working tree" in notes[-1]
    assert str(worktree / "results" / "demo-cpu-3") in notes[-1]


def test_an_ignored_folder_in_a_git_tree_is_not_flagged(
    home: Path, worktree: Path, short_run: tuple
) -> None:
    (worktree / ".gitignore").write_text("/scratch/\n")
    shutil.copytree(worktree / "results", worktree / "scratch" / "results", dirs_exist_ok=True)
    done = _toolkit(
        home, "run", "--agent", "scripted", "--track", "demo-cpu-3", "--seed", "5",
        "--budget", "10", "--device", "cpu", "--quiet", "--results", "scratch/results",
        cwd=worktree,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "git working tree" not in done.stderr


# --- item 11: plain, unwrapped text when not a terminal -----------------------------------------


def test_a_piped_run_prints_plain_unwrapped_text(short_run: tuple) -> None:
    done, path = short_run
    _plain(done.stdout + done.stderr)
    assert len(str(path)) > 80  # so that wrapping at 80 columns would have split it


def _long_results(tmp: Path, *, bad: bool = False) -> Path:
    """A results folder with long names (and, when `bad`, one file whose total is wrong)."""
    sys.path.insert(0, str(REPO / "tests" / "stats"))
    from results_factory import run_dict, track_dict, write_registry, write_run

    results = tmp / (f"results-{'bad' if bad else 'good'}-in-a-folder-with-a-long-name-" + "x" * 40)
    write_registry(results, [track_dict(title="A track whose title is long " + "y" * 60)])
    write_run(results, run_dict("r0", model=LONG))
    write_run(results, run_dict("r1", model=LONG, seed=1, status="invalid"))
    if bad:
        run = run_dict(BAD_ID, seed=2)
        run["score"] = {"percent": 50.0, "passed": 1, "total": 2}
        run["families"] = {}
        write_run(results, run)
    return results


BAD_ID = "bad-" + "z" * 60


def test_every_command_prints_plain_text_into_a_pipe(home: Path, tmp_path: Path) -> None:
    good, bad = _long_results(tmp_path), _long_results(tmp_path, bad=True)
    exam_out = tmp_path / ("exam-output-folder-with-a-long-name-" + "q" * 50)
    exam = str(exam_out / "exam.jsonl")
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "inference.py").write_text(
        textwrap.dedent(
            """
            class Model:
                def generate(self, prompts, lengths):
                    return [b" " * n for n in lengths]

            def load(bundle_dir, device):
                return Model()
            """
        )
    )
    commands = {
        "build-exam": ["build-exam", "--bank", "exam_builder/banks/public/validation",
                       "--out", str(exam_out), "--allow-in-repo"],
        "verify-exam": ["verify-exam", exam, "--sha256", "0" * 8],
        "grade": ["grade", str(bundle), "--exam", exam, "--device", "cpu"],
        "validate": ["runs", "validate", str(bad)],
        "recover": ["runs", "recover"],
        "clean": ["runs", "clean", "--dry-run"],
        "leaderboard": ["leaderboard", "--results", str(good)],
    }  # fmt: skip
    out = {}
    for name, args in commands.items():
        done = _toolkit(home, *args)
        out[name] = done
        _plain(done.stdout + done.stderr)
        assert "Traceback" not in done.stderr, (args, done.stderr)
    assert any(LONG in line for line in out["leaderboard"].stdout.splitlines()), out["leaderboard"]
    assert any(exam in line for line in out["build-exam"].stdout.splitlines())
    assert "MISMATCH" in out["verify-exam"].stderr
    assert "Score:" in out["grade"].stdout, out["grade"].stdout + out["grade"].stderr
    assert any(
        str(bad / "v1-test" / f"{BAD_ID}.json") in line
        for line in out["validate"].stderr.splitlines()
    )


def test_on_a_terminal_output_is_styled(home: Path, tmp_path: Path) -> None:
    """The other side: a real (pseudo-)terminal still gets rich's colours and table borders."""
    results = _long_results(tmp_path)
    main, child = pty.openpty()
    proc = subprocess.Popen(
        [TOOLKIT, "leaderboard", "--results", str(results)],
        stdin=child, stdout=child, stderr=child, env=_env(home), cwd=REPO,
    )  # fmt: skip
    os.close(child)
    chunks = []
    while True:
        try:
            data = os.read(main, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(main)
    assert b"\x1b[" in b"".join(chunks)


# --- item 10: each per-file error once ------------------------------------------------------------


def test_validate_prints_each_error_once(tmp_path: Path) -> None:
    results = _long_results(tmp_path, bad=True)
    done = CliRunner().invoke(cli, ["runs", "validate", str(results)])
    assert done.exit_code == 1
    errors = [line for line in done.output.splitlines() if line.startswith("error:")]
    bad = [line for line in errors if f"{BAD_ID}.json" in line]
    assert len(bad) == 1, done.output
    assert "field 'score.total'" in bad[0]
    assert len(errors) == len(set(errors)) == 1


# --- items 9 and 15: bad training data is one line and leaves nothing behind --------------------


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("binary.jsonl", bytes(range(128, 256)) * 64, "not UTF-8 text"),
        ("noise.txt", os.urandom(50_000), "of its bytes are not text"),
    ],
)
def test_training_data_that_is_not_text_is_one_line(
    home: Path, tmp_path: Path, name: str, content: bytes, message: str
) -> None:
    source = tmp_path / name
    source.write_bytes(content)
    done = _toolkit(
        home, "run", "--agent", "scripted", "--seed", "0", "--train-data", str(source),
        "--results", str(tmp_path / "results"), "--device", "cpu",
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "UnicodeDecodeError" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and message in errors[0] and str(source) in errors[0]
    assert _leftovers(home) == []  # no empty prepared-data-* after a failed start


# --- item 7: a track that pins its training data ------------------------------------------------


def _registry_with_pin(tmp_path: Path, train: str) -> Path:
    results = tmp_path / "pinned-results"
    results.mkdir()
    tracks = json.loads((REPO / "results" / "tracks.json").read_text())
    for track in tracks:
        if track["id"] == "demo-cpu-3":
            track["train_data_sha256"] = train
    (results / "tracks.json").write_text(json.dumps(tracks))
    return results


def test_other_training_data_refuses_to_start_on_a_pinned_track(home: Path, tmp_path: Path) -> None:
    results = _registry_with_pin(tmp_path, "0123abcd")
    done = _toolkit(
        home, "run", "--agent", "scripted", "--seed", "0", "--budget", "10",
        "--results", str(results), "--device", "cpu",
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "not the training data of track 'demo-cpu-3'" in errors[0]
    assert "0123abcd" in errors[0]
    assert not (results / "demo-cpu-3").exists() and _leftovers(home) == []


def test_the_pinned_data_runs_and_is_recorded(home: Path, tmp_path: Path, short_run: tuple) -> None:
    _, first = short_run
    recorded = json.loads(first.read_text())["config"]["train_data"]
    assert recorded["source"] == "default corpus"
    assert all(len(recorded[k]) == 64 for k in ("source_sha256", "train_sha256", "val_sha256"))
    results = _registry_with_pin(tmp_path, recorded["train_sha256"][:16])
    done = _toolkit(
        home, "run", "--agent", "scripted", "--seed", "1", "--budget", "10",
        "--results", str(results), "--device", "cpu", "--quiet",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (path,) = (results / "demo-cpu-3").glob("*.json")
    assert json.loads(path.read_text())["config"]["train_data"] == recorded


# --- item 15: a finished run leaves nothing in $ARI_HOME ------------------------------------------


def test_a_finished_run_leaves_no_workspace(home: Path, short_run: tuple) -> None:
    assert _leftovers(home) == []
    assert (home / "exams").is_dir()  # the caches stay: they are reused
