"""Words and files an operator meets (issue 29 items 2 and 3): result and registry files that
other users can read, no "unknown track" for a registered track, no score for an invalid run,
and a state folder that cannot be read said as such (not "no runs yet")."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.stats.results_factory import run_dict
from toolkit.cli import cli
from toolkit.commands.options import find_registry
from toolkit.results.model import RunResult, save_run
from toolkit.run import journal
from toolkit.tracks.model import get_track, load_tracks
from toolkit.tracks.registry import carry_track

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_results_and_registry_files_are_readable_by_other_users(
    tmp_path: Path, umask_022: None
) -> None:
    results = tmp_path / "results"
    official = get_track(REPO / "results", "v1-h100-1h")
    assert carry_track(results, REPO / "results", official)
    assert _mode(results / "tracks.json") == 0o644
    assert _mode(results / "protocol_fixes.json") == 0o644
    run = RunResult.model_validate(run_dict("r0", track="v1-h100-1h"))
    assert _mode(save_run(run, results)) == 0o644
    os.umask(0o077)  # an operator who wants them private still gets that
    again = RunResult.model_validate(run_dict("r1", track="v1-h100-1h"))
    assert _mode(save_run(again, results)) == 0o600


def test_a_registered_track_is_found_past_a_results_folder_that_lacks_it(
    tmp_path: Path,
) -> None:
    """A results folder holding only the demo track must not hide the official one."""
    results = tmp_path / "results"
    results.mkdir()
    demo_only = [t for t in json.loads((REPO / "results" / "tracks.json").read_text())]
    demo_only = [t for t in demo_only if t["id"] == "demo-cpu-3"]
    (results / "tracks.json").write_text(json.dumps(demo_only))
    assert sorted(load_tracks(results)) == ["demo-cpu-3"]
    found = find_registry(results, None, "v1-h100-1h")
    assert "v1-h100-1h" in load_tracks(found)
    assert find_registry(results, None, "demo-cpu-3") == results  # its own entry first
    done = CliRunner().invoke(
        cli,
        [
            "run",
            "--track",
            "v1-h100-1h",
            "--seed",
            "0",
            "--device",
            "cpu",
            "--results",
            str(results),
        ],
    )
    assert "unknown track" not in done.output, done.output
    assert not (results / "v1-h100-1h").exists()  # refused by the host check, nothing written


def test_an_invalid_run_shows_no_score_in_runs_list(tmp_path: Path) -> None:
    results = tmp_path / "results"
    for run_id, status in (("r-valid", "valid"), ("r-invalid", "invalid")):
        saved = save_run(
            RunResult.model_validate(run_dict(run_id, status=status, passed=0)), results
        )
        journal.append(
            journal.Entry(
                run_id=run_id,
                track="v1-test",
                model="model-a",
                effort=None,
                seed=0,
                agent="opencode",
                started_at=datetime.now(UTC),
                budget_s=3600,
                harness=str(tmp_path / "gone" / run_id),
                artifacts=str(tmp_path / "art"),
                results_dir=str(results),
            )
        )
        assert saved.is_file()
    done = CliRunner().invoke(cli, ["runs", "list", "--all"])
    assert done.exit_code == 0, done.output
    lines = {line.split()[1]: line for line in done.output.splitlines() if "r-" in line}
    assert "0.0%" in lines["r-valid"] and "%" not in lines["r-invalid"], done.output
    as_json = CliRunner().invoke(cli, ["runs", "list", "--all", "--json"])
    records = {r["run_id"]: r for r in map(json.loads, as_json.output.splitlines())}
    assert "score" not in records["r-invalid"] and records["r-valid"]["score"] == 0.0


def test_an_unreadable_state_folder_is_not_no_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARI_HOME", "/proc/nope")
    done = CliRunner().invoke(cli, ["runs", "list"])
    assert done.exit_code == 1
    assert "no runs on this host" not in done.output
    assert "/proc/nope" in done.output and "set ARI_HOME" in done.output
    assert len(done.output.strip().splitlines()) == 1


def test_run_without_results_where_there_is_none_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`toolkit run` from a folder without --results used to make ./results there silently."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ARI_RESULTS_DIR", raising=False)
    done = CliRunner().invoke(cli, ["run", "--seed", "0", "--device", "cpu"])
    assert done.exit_code == 2, done.output
    assert len(done.output.strip().splitlines()) == 1
    assert "--results DIR" in done.output and "/tmp/ari-results" in done.output
    assert list(tmp_path.iterdir()) == []


def test_training_text_we_cannot_read_leaves_nothing_behind(tmp_path: Path) -> None:
    """`--train-data /bin/ls` said "unsupported training text ''" and left a results folder."""
    results = tmp_path / "res"
    done = CliRunner().invoke(
        cli,
        [
            "run",
            "--seed",
            "0",
            "--device",
            "cpu",
            "--train-data",
            "/bin/ls",
            "--results",
            str(results),
        ],
    )
    assert done.exit_code == 2, done.output
    assert "(no file extension)" in done.output and "''" not in done.output
    assert "use .txt" in done.output and len(done.output.strip().splitlines()) == 1
    assert not results.exists()


def test_runs_list_records_a_run_whose_harness_died(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After `kill -9` of the harness, `runs list` showed "interrupted" with a blank clock
    until `runs recover`; the next command records it (as the docs say)."""
    import subprocess

    from toolkit.run import recovery

    monkeypatch.setenv("ARI_HOME", str(tmp_path / "home"))
    results = tmp_path / "results"
    run_id = "20261125T120000-model-a-s3-dead"
    artifacts = results / "v1-test" / run_id
    artifacts.mkdir(parents=True)
    dead = subprocess.Popen(["true"])
    dead.wait()
    skeleton = RunResult.model_validate(
        run_dict(run_id, seed=3, status="invalid", status_reason="running", passed=0)
    )
    recovery.write_marker(
        recovery.runs_root() / run_id / "harness",
        recovery.Marker(
            pid=dead.pid,
            pid_start="gone",
            results_dir=str(results),
            artifacts=str(artifacts),
            skeleton=skeleton,
        ),
    )
    done = CliRunner().invoke(cli, ["runs", "list", "--all", "--json"])
    assert done.exit_code == 0, done.output
    record = next(json.loads(line) for line in done.output.splitlines() if line.startswith("{"))
    assert record["state"] == "invalid", done.output
    assert (results / "v1-test" / f"{run_id}.json").is_file()


def test_the_leaderboard_of_a_folder_without_the_track_is_not_unknown_track(
    tmp_path: Path,
) -> None:
    results = tmp_path / "results"
    results.mkdir()
    every = json.loads((REPO / "results" / "tracks.json").read_text())
    (results / "tracks.json").write_text(json.dumps([t for t in every if t["id"] == "demo-cpu-3"]))
    done = CliRunner().invoke(
        cli, ["leaderboard", "--track", "v1-h100-1h", "--results", str(results)]
    )
    assert done.exit_code == 2, done.output
    assert "unknown track" not in done.output
    assert "no runs of track 'v1-h100-1h'" in done.output
    bad = CliRunner().invoke(cli, ["leaderboard", "--track", "nope", "--results", str(results)])
    assert bad.exit_code == 2 and "unknown track 'nope'" in bad.output
