"""`runs validate`, `runs verify` and `leaderboard` name a link in a results folder (issue #38).

Each case takes a copy of the committed results folder and puts a link on the demo run's
path (its track folder, its run folder, a folder one level down, one of its files), or gives a
file a second name. `runs validate` and `runs verify` must name the link (before, validate said
only "unsigned", or that hashes changed, and verify re-graded through the link); `leaderboard`
still shows the track's board and lists the refused file with its reason.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.stats.results_factory import run_dict, write_run
from toolkit.cli import cli

REPO = Path(__file__).resolve().parents[2]
SECRET = "-----BEGIN PRIVATE KEY-----\nnot for publishing\n"


def _copy(tmp_path: Path) -> tuple[Path, Path]:
    """(results copy, the demo run's result file)."""
    results = tmp_path / "results"
    shutil.copytree(REPO / "results", results)
    return results, next((results / "demo-cpu").glob("*.json"))


def _outside(tmp_path: Path, like: Path) -> Path:
    """A folder outside results/ with the same files as `like`, each holding the secret."""
    out = tmp_path / "outside" / like.name
    out.mkdir(parents=True)
    for f in like.iterdir():
        if f.is_file():
            (out / f.name).write_text(SECRET)
    return out


def _track_folder(results: Path, run: Path, tmp_path: Path) -> Path:
    track = results / "demo-cpu"
    moved = tmp_path / "outside" / "demo-cpu"
    moved.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(track, moved)
    track.symlink_to(moved)
    return track


def _run_folder(results: Path, run: Path, tmp_path: Path) -> Path:
    folder = run.with_suffix("")
    target = _outside(tmp_path, folder)
    shutil.rmtree(folder)
    folder.symlink_to(target)
    return folder


def _one_level_deeper(results: Path, run: Path, tmp_path: Path) -> Path:
    link = run.with_suffix("") / "candidates"
    link.symlink_to(_outside(tmp_path, run.with_suffix("")))
    return link


def _artifact(results: Path, run: Path, tmp_path: Path) -> Path:
    link = run.with_suffix("") / "audit.jsonl"
    target = _outside(tmp_path, run.with_suffix("")) / "audit.jsonl"
    link.unlink()
    link.symlink_to(target)
    return link


def _hard_link(results: Path, run: Path, tmp_path: Path) -> Path:
    link = run.with_suffix("") / "transcript.txt"
    target = _outside(tmp_path, run.with_suffix("")) / "transcript.txt"
    link.unlink()
    os.link(target, link)
    return link


ATTACKS: dict[str, tuple[Callable[[Path, Path, Path], Path], str]] = {
    "track folder": (_track_folder, "a symlink"),
    "run folder": (_run_folder, "a symlink"),
    "one level deeper": (_one_level_deeper, "a symlink"),
    "artifact": (_artifact, "a symlink"),
    "hard link": (_hard_link, "a hard link"),
}


def test_the_untouched_copy_validates(tmp_path: Path) -> None:
    results, _ = _copy(tmp_path)
    done = CliRunner().invoke(cli, ["runs", "validate", str(results)])
    assert done.exit_code == 0, done.output


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_runs_validate_names_the_link(tmp_path: Path, attack: str) -> None:
    results, run = _copy(tmp_path)
    make, what = ATTACKS[attack]
    link = make(results, run, tmp_path)
    for target in (results, run):
        done = CliRunner().invoke(cli, ["runs", "validate", str(target)])
        assert done.exit_code == 1, done.output
        assert f"{link}: {what}" in done.output, (target, done.output)
        assert "not for publishing" not in done.output


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_runs_verify_refuses_before_it_re_grades(tmp_path: Path, attack: str) -> None:
    results, run = _copy(tmp_path)
    make, what = ATTACKS[attack]
    link = make(results, run, tmp_path)
    exam = results / "tracks.json"  # never read: the link is refused first
    done = CliRunner().invoke(cli, ["runs", "verify", str(run), "--exam", str(exam)])
    assert done.exit_code in (1, 2), done.output
    assert f"{link}: {what}" in done.output, done.output


def test_leaderboard_shows_the_other_rows_and_lists_the_bad_files(tmp_path: Path) -> None:
    results, run = _copy(tmp_path)
    link = _run_folder(results, run, tmp_path)
    truncated = run.parent / "truncated.json"
    truncated.write_text(run.read_text()[:100])
    write_run(results, run_dict("good", track="demo-cpu", model="good-model"))
    done = CliRunner().invoke(cli, ["leaderboard", "--results", str(results)])
    assert done.exit_code == 1, done.output
    assert "good-model" in done.output  # the other row is on the board
    refused = [line for line in done.output.splitlines() if line.startswith("refused: ")]
    assert len(refused) == 2, done.output
    assert f"{link}: a symlink" in refused[0]
    assert str(truncated) in refused[1] and "invalid JSON" in refused[1]
    assert "2 result file(s) refused" in done.output
