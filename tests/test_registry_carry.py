"""A results folder is self-contained: a run carries its track (and its protocol fixes) there,
so the leaderboard and the site read the folder alone."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from toolkit.tracks.model import RegistryError, get_track, load_fixes, load_tracks
from toolkit.tracks.registry import carry_track

REPO = Path(__file__).resolve().parents[1]


def _registry(tmp_path: Path) -> Path:
    reg = tmp_path / "registry"
    reg.mkdir()
    shutil.copy(REPO / "results" / "tracks.json", reg)
    fixes = [
        {
            "id": "demo-fix",
            "track": "demo-cpu-3",
            "date": "2026-11-25",
            "title": "a change (test data)",
            "description": "test data",
            "revision": 2,
            "action": "legacy",
        }
    ]
    tracks = json.loads((reg / "tracks.json").read_text())
    for t in tracks:
        t["protocol_revision"] = max(t.get("protocol_revision", 1), 2)
    (reg / "tracks.json").write_text(json.dumps(tracks))
    (reg / "protocol_fixes.json").write_text(json.dumps(fixes))
    return reg


def test_a_fresh_results_folder_gets_its_track_and_fixes(tmp_path: Path) -> None:
    reg = _registry(tmp_path)
    track = get_track(reg, "demo-cpu-3")
    out = tmp_path / "out"
    assert carry_track(out, reg, track)
    assert list(load_tracks(out)) == ["demo-cpu-3"]
    assert load_tracks(out)["demo-cpu-3"] == track
    assert [f.id for f in load_fixes(out, load_tracks(out))] == ["demo-fix"]
    assert not carry_track(out, reg, track)  # once is enough
    other = get_track(reg, "v1-h100-1h")
    assert carry_track(out, reg, other)
    assert sorted(load_tracks(out)) == ["demo-cpu-3", "v1-h100-1h"]


def test_a_folder_that_disagrees_about_the_track_is_refused(tmp_path: Path) -> None:
    reg = _registry(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    tracks = json.loads((reg / "tracks.json").read_text())
    next(t for t in tracks if t["id"] == "demo-cpu-3")["budget_s"] = 999  # edited
    (out / "tracks.json").write_text(json.dumps(tracks))
    with pytest.raises(RegistryError, match="differs"):
        carry_track(out, reg, get_track(reg, "demo-cpu-3"))


def test_a_fix_reworded_in_the_registry_is_reworded_in_the_folder(tmp_path: Path) -> None:
    """A description corrected in the registry (issue #38: "3 decimals") must not lock out a
    results folder that carries the old words; a fix whose rules differ still is refused."""
    reg = _registry(tmp_path)
    track = get_track(reg, "demo-cpu-3")
    out = tmp_path / "out"
    carry_track(out, reg, track)
    fixes = json.loads((reg / "protocol_fixes.json").read_text())
    fixes[0]["description"] = "test data, corrected"
    (reg / "protocol_fixes.json").write_text(json.dumps(fixes))
    assert carry_track(out, reg, track)
    assert [f.description for f in load_fixes(out, load_tracks(out))] == ["test data, corrected"]
    assert not carry_track(out, reg, track)
    fixes[0]["action"] = "rerun"
    (reg / "protocol_fixes.json").write_text(json.dumps(fixes))
    with pytest.raises(RegistryError, match="protocol fix 'demo-fix' differs"):
        carry_track(out, reg, track)


def test_the_registry_itself_is_left_alone(tmp_path: Path) -> None:
    reg = _registry(tmp_path)
    before = (reg / "tracks.json").read_text()
    assert not carry_track(reg, reg, get_track(reg, "demo-cpu-3"))
    assert (reg / "tracks.json").read_text() == before


def test_a_run_into_a_new_folder_can_be_read_alone(tmp_path: Path) -> None:
    """The README's own example: `--results /tmp/ari-results`, then the leaderboard on it."""
    import os
    import subprocess
    import sys

    toolkit = str(Path(sys.executable).parent / "toolkit")
    out = tmp_path / "ari-results"
    env = {**os.environ, "ARI_HOME": str(tmp_path / "home")}
    env.pop("ARI_RESULTS_DIR", None)
    argv = ["run", "--agent", "scripted", "--track", "demo-cpu-3", "--seed", "0", "--budget", "10"]
    run = subprocess.run(
        [toolkit, *argv, "--device", "cpu", "--quiet", "--results", str(out)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,  # outside the checkout: the registry is the toolkit's own
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert list(load_tracks(out)) == ["demo-cpu-3"]
    board = subprocess.run(
        [toolkit, "leaderboard", "--results", str(out), "--track", "demo-cpu-3"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert board.returncode == 0, board.stdout + board.stderr
    assert "scripted-baseline" in board.stdout
