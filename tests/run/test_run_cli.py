"""`toolkit run` refuses what would make a result meaningless, with one clear line."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from toolkit.cli import cli

REPO = Path(__file__).resolve().parents[2]
BASE = ["run", "--seed", "0", "--results", str(REPO / "results")]


def test_budget_override_is_refused_on_an_official_track() -> None:
    done = CliRunner().invoke(cli, [*BASE, "--track", "v1-h100-1h", "--budget", "60"])
    assert done.exit_code == 2
    assert "--budget is for trying things out" in done.output


def test_official_track_needs_its_exam(monkeypatch: pytest.MonkeyPatch) -> None:
    # On a host that could run it (the pre-flight passes): the exam is the next thing asked.
    monkeypatch.setattr("toolkit.commands.run.preflight", lambda _track, _backend: None)
    done = CliRunner().invoke(cli, [*BASE, "--track", "v1-h100-1h", "--device", "cpu"])
    assert done.exit_code == 2
    assert "needs its frozen exam: pass --exam" in done.output


def test_exam_with_the_wrong_hash_is_refused(tmp_path: Path) -> None:
    exam = tmp_path / "exam.jsonl"
    exam.write_text('{"answer":"b","family":"lists","id":"q1","prompt":"a"}\n')
    done = CliRunner().invoke(cli, [*BASE, "--exam", str(exam), "--device", "cpu"])
    assert done.exit_code == 2
    assert "does not match track 'demo-cpu-3'" in done.output


def test_unknown_track_lists_the_known_ones() -> None:
    done = CliRunner().invoke(cli, [*BASE, "--track", "nope"])
    assert done.exit_code == 2
    assert "unknown track 'nope'" in done.output and "demo-cpu-3" in done.output


def test_registry_demo_hashes_match_the_public_banks() -> None:
    """If the exam builder or the demo bank changes, the demo track's hashes must follow."""
    from exam_builder.exam_file import sha256_file
    from toolkit.run.inputs import DEMO_BANK, built_exam, public_set
    from toolkit.tracks.model import get_track

    track = get_track(REPO / "results", "demo-cpu-3")
    assert track.matches_exam(sha256_file(built_exam(DEMO_BANK, "demo")))
    assert sha256_file(public_set()) == track.public_set_sha256


def test_two_runs_of_one_key_at_once_are_refused(tmp_path: Path) -> None:
    from toolkit.campaign.claims import Claims
    from toolkit.campaign.plan import RunKey

    results = tmp_path / "results"
    results.mkdir()
    (results / "tracks.json").write_text((REPO / "results" / "tracks.json").read_text())
    held = Claims(results)  # as a run (or a campaign) going on holds it
    assert held.claim(RunKey("demo-cpu-3", "scripted-baseline", None, 3))
    argv = ["run", "--seed", "3", "--results", str(results), "--device", "cpu"]
    done = CliRunner().invoke(cli, argv, env={"ARI_HOME": str(tmp_path / "home")})
    assert done.exit_code == 1
    assert "is already going on" in done.output and "use another seed" in done.output
    assert not (tmp_path / "home" / "data").exists()  # refused before any work
    held.release_all()
