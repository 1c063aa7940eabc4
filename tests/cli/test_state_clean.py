"""`toolkit runs clean`: what finished runs left in $ARI_HOME goes; a run in progress never."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from toolkit.cli import cli
from toolkit.results.model import RunResult
from toolkit.run.recovery import MARKER, PIDS, Marker, process_start, write_marker

SKELETON = {
    "run_id": "x",
    "track": "demo-cpu-3",
    "model": "scripted-baseline",
    "agent": "scripted",
    "seed": 0,
    "started_at": "2026-11-22T10:00:00Z",
    "status": "invalid",
    "status_reason": "the harness died",
    "score": {"percent": 0.0, "passed": 0, "total": 100},
    "timings": {"budget_s": 300, "used_s": 0, "runner_s": 0},
    "config": {
        "toolkit_version": "0.1.0",
        "task_brief_sha256": "a" * 64,
        "exam_sha256": "b" * 64,
        "public_set_sha256": "c" * 64,
        "backend": "local",
        "protocol_revision": 1,
    },
}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "ari-home"
    home.mkdir()
    monkeypatch.setenv("ARI_HOME", str(home))
    return home


@pytest.fixture
def live_pid() -> Iterator[int]:
    """A process that is alive for the whole test (a harness still running, say)."""
    proc = subprocess.Popen(["sleep", "300"])
    yield proc.pid
    proc.kill()
    proc.wait()


def _run_folder(home: Path, run_id: str, marker_pid: int | None, finished: bool = True) -> Path:
    folder = home / "runs" / run_id
    (folder / "workspace" / "bundles" / "locked").mkdir(parents=True)
    (folder / "workspace" / "bundles" / "locked" / "weights.bin").write_bytes(b"w" * 1000)
    (folder / "workspace" / "bundles" / "locked").chmod(0o500)  # an agent's read-only folder
    (folder / "harness").mkdir()
    if finished:
        (folder / "harness" / PIDS).write_text("1 0\n")
    if marker_pid is not None:
        write_marker(
            folder / "harness",
            Marker(
                pid=marker_pid,
                pid_start=process_start(marker_pid),
                results_dir="/nowhere",
                artifacts="/nowhere/x",
                skeleton=RunResult.model_validate(SKELETON),
            ),
        )
    return folder


def _data_folder(home: Path, name: str, owner: str | None, age_s: float = 0) -> Path:
    folder = home / f"prepared-data-{name}"
    folder.mkdir()
    if owner is not None:
        (folder / "owner").write_text(owner)
        (folder / "train.bin").write_bytes(b"t" * 5000)
    if age_s:
        old = time.time() - age_s
        os.utime(folder, (old, old))
    return folder


def _state(home: Path, live_pid: int) -> dict[str, Path]:
    gone = 2**22 + 7  # above the largest pid_max Linux allows: never alive
    return {
        "finished": _run_folder(home, "r-finished", None),
        "running": _run_folder(home, "r-running", live_pid),
        "interrupted": _run_folder(home, "r-interrupted", gone),
        "starting": _run_folder(home, "r-starting", None, finished=False),
        "data-dead": _data_folder(home, "dead", f"{gone} 123\n"),
        "data-empty-old": _data_folder(home, "empty", None, age_s=7200),
        "data-live": _data_folder(home, "live", f"{live_pid} {process_start(live_pid)}\n"),
        "exams": _cache(home),
    }


def _cache(home: Path) -> Path:
    (home / "exams" / "demo").mkdir(parents=True)
    (home / "exams" / "demo" / "exam.jsonl").write_text("{}\n")
    return home / "exams"


def test_dry_run_lists_and_removes_nothing(home: Path, live_pid: int) -> None:
    paths = _state(home, live_pid)
    done = CliRunner().invoke(cli, ["runs", "clean", "--dry-run"])
    assert done.exit_code == 0, done.output
    assert all(p.exists() for p in paths.values())
    lines = done.output.splitlines()
    for key in ("finished", "data-dead", "data-empty-old"):
        assert any(line.startswith(f"would remove: {paths[key]} ") for line in lines), key
    for key in ("running", "interrupted", "starting", "data-live"):
        assert any(line.startswith(f"kept: {paths[key]} ") for line in lines), key
    assert "empty (a start that failed)" in done.output
    assert "run `toolkit runs recover` first" in done.output
    assert "3 item(s), would free" in lines[-1]


def test_clean_removes_leftovers_and_never_a_running_run(home: Path, live_pid: int) -> None:
    paths = _state(home, live_pid)
    done = CliRunner().invoke(cli, ["runs", "clean"])
    assert done.exit_code == 0, done.output
    gone = {k for k, p in paths.items() if not p.exists()}
    assert gone == {"finished", "data-dead", "data-empty-old"}, done.output
    assert (paths["running"] / "harness" / MARKER).is_file()
    assert (paths["running"] / "workspace" / "bundles" / "locked" / "weights.bin").is_file()


def test_caches_go_only_with_the_flag_and_not_during_a_run(home: Path, live_pid: int) -> None:
    paths = _state(home, live_pid)
    CliRunner().invoke(cli, ["runs", "clean"])
    assert paths["exams"].exists()
    done = CliRunner().invoke(cli, ["runs", "clean", "--caches"])
    assert paths["exams"].exists() and "a run is in progress" in done.output
    # The running run ends (its marker goes, as when its result is published).
    (paths["running"] / "harness" / MARKER).unlink()
    (paths["starting"]).rename(home / "elsewhere")  # and nothing else is being set up
    done = CliRunner().invoke(cli, ["runs", "clean", "--caches"])
    assert not paths["exams"].exists() and not paths["running"].exists(), done.output
