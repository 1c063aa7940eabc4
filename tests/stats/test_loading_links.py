"""Links in a results folder: nothing outside it is ever read for publishing.

Each case moves part of a good run's path (track folder, run folder, a folder inside it, an
artifact, the result file) out of results/ and leaves a link in its place, pointing at a place
that holds a secret under the same names. Loading refuses that run, naming the link, and (with
`keep_going`) loads every other run; `results_problems` (`runs validate`) names it too.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from results_factory import run_dict, track_dict, write_registry, write_run

from toolkit.results.model import ResultsError, load_run
from toolkit.stats import load_results, results_problems
from toolkit.tracks.model import RegistryError

SECRET = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEI\n"


def _results(tmp_path: Path) -> Path:
    """A results folder with a good run in each track; `linked` (track v1-test) has artifacts
    one level down too."""
    results = tmp_path / "results"
    write_registry(results, [track_dict(), track_dict("demo-test", demo=True)])
    write_run(results, run_dict("other", track="demo-test", seed=0), {"audit.jsonl": "{}\n"})
    write_run(results, run_dict("linked", seed=1), {"audit.jsonl": "{}\n", "sub/deep.txt": "d\n"})
    return results


def _move_out(path: Path, outside: Path) -> Path:
    """Move `path` to `outside`, with the secret written over its files, and link it back."""
    shutil.move(path, outside)
    for file in [outside] if outside.is_file() else outside.rglob("*"):
        if file.is_file() and file.suffix != ".json":
            file.write_text(SECRET)
    os.symlink(outside, path)
    return path


def _track(r: Path, out: Path) -> Path:
    return _move_out(r / "v1-test", out / "track")


def _run_folder(r: Path, out: Path) -> Path:
    return _move_out(r / "v1-test" / "linked", out / "operator")


def _folder_inside(r: Path, out: Path) -> Path:
    return _move_out(r / "v1-test" / "linked" / "sub", out / "keys")


def _artifact(r: Path, out: Path) -> Path:
    return _move_out(r / "v1-test" / "linked" / "audit.jsonl", out / "grading.log")


def _result_file(r: Path, out: Path) -> Path:
    return _move_out(r / "v1-test" / "linked.json", out / "linked.json")


def _hard_link(r: Path, out: Path) -> Path:
    key = out / "result-signing.ed25519"
    key.write_text(SECRET)
    artifact = r / "v1-test" / "linked" / "audit.jsonl"
    artifact.unlink()
    os.link(key, artifact)
    return artifact


CASES: dict[str, tuple[Callable[[Path, Path], Path], str]] = {
    "track folder": (_track, "a symlink"),
    "run folder": (_run_folder, "a symlink"),
    "folder inside the run folder": (_folder_inside, "a symlink"),
    "artifact": (_artifact, "a symlink"),
    "result file": (_result_file, "a symlink"),
    "hard-linked artifact": (_hard_link, "a hard link"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_link_on_a_runs_path_is_refused_and_named(tmp_path: Path, case: str) -> None:
    results = _results(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    make, what = CASES[case]
    link = make(results, outside)

    with pytest.raises(ResultsError) as info:
        load_results(results)
    message = str(info.value)
    assert f"{link}: {what}" in message and "\n" not in message, message
    assert SECRET.splitlines()[0] not in message

    kept = load_results(results, keep_going=True)
    assert [r.result.run_id for r in kept.runs] == ["other"]  # the other row stays
    assert len(kept.refused) == 1 and f"{link}: {what}" in kept.refused[0], kept.refused
    assert any(f"{link}: {what}" in p for p in results_problems(results))


@pytest.mark.parametrize("case", ["track folder", "result file"])
def test_load_run_refuses_a_link_on_the_way_to_the_file(tmp_path: Path, case: str) -> None:
    results = _results(tmp_path)
    (tmp_path / "outside").mkdir()
    link = CASES[case][0](results, tmp_path / "outside")
    with pytest.raises(ResultsError, match=f"^{link}: a symlink, refused"):
        load_run(results / "v1-test" / "linked.json")


def test_keep_going_lists_every_bad_file_and_loads_the_rest(tmp_path: Path) -> None:
    results = _results(tmp_path)
    (results / "v1-test" / "truncated.json").write_text('{"run_id": "trunc')
    write_run(results, run_dict("noscore", seed=4, score={"percent": -1.0}))
    kept = load_results(results, keep_going=True)
    assert sorted(r.result.run_id for r in kept.runs) == ["linked", "other"]
    assert [p.split(": ", 1)[0] for p in kept.refused] == [
        str(results / "v1-test" / "noscore.json"),
        str(results / "v1-test" / "truncated.json"),
    ]
    assert "score" in kept.refused[0] and "invalid JSON" in kept.refused[1]


@pytest.mark.parametrize("name", ["tracks.json", "protocol_fixes.json"])
def test_a_registry_file_that_is_a_link_is_refused(tmp_path: Path, name: str) -> None:
    results = _results(tmp_path)
    if not (results / name).exists():
        (results / name).write_text("[]")
    elsewhere = tmp_path / name
    shutil.move(results / name, elsewhere)
    os.symlink(elsewhere, results / name)
    with pytest.raises(RegistryError, match=f"^{results / name}: a symlink, refused"):
        load_results(results, keep_going=True)


def test_a_refusal_stays_one_line_whatever_the_names(tmp_path: Path) -> None:
    results = _results(tmp_path)
    (results / "v1-test" / "bad\n\x1b[2Jname.json").write_text("{")
    with pytest.raises(ResultsError) as info:
        load_results(results)
    assert "\n" not in str(info.value) and "\x1b" not in str(info.value)
    assert "bad\\n\\x1b[2Jname.json" in str(info.value)
    kept = load_results(results, keep_going=True)
    assert len(kept.refused) == 1 and "\n" not in kept.refused[0]
