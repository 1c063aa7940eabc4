"""Many processes recover dead runs at once, as they do on a busy host.

Every run that starts looks for dead harnesses (`orchestrate`), and so does every campaign task
whose run process died; on a Ray host the simulated nodes share one state folder. Two of them
once read the same marker: one renamed it, the other's rename raised `FileNotFoundError`, its
campaign task failed with it, and the killed run's `invalid` result was never collected (CI: a
Ray campaign rerun a seed it never recorded as `invalid`). Here eight recoverers race over
thirty dead runs: each run is recorded once, by one of them, and none raises.
"""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

from tests.stats.results_factory import run_dict
from toolkit.results.model import RunResult, load_run
from toolkit.run import recovery

RUNS = 30
RECOVERERS = 8


def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def _dead_run(root: Path, results: Path, index: int, pid: int) -> str:
    run_id = f"20261207T120000-model-a-s{index}-dead"
    artifacts = results / "v1-test" / run_id
    artifacts.mkdir(parents=True)
    skeleton = RunResult.model_validate(
        run_dict(run_id, seed=index, status="invalid", status_reason="running", passed=0)
    )
    recovery.write_marker(
        root / run_id / "harness",
        recovery.Marker(
            pid=pid,
            pid_start="1",  # no live process started at tick 1 has this pid now
            results_dir=str(results),
            artifacts=str(artifacts),
            skeleton=skeleton,
        ),
    )
    return run_id


def test_racing_recoverers_record_each_dead_run_once(tmp_path: Path) -> None:
    root, results = tmp_path / "runs", tmp_path / "results"
    pid = _dead_pid()
    ids = {_dead_run(root, results, i, pid) for i in range(RUNS)}
    start = threading.Barrier(RECOVERERS)
    written: list[list[Path]] = []
    errors: list[str] = []

    def recover() -> None:
        start.wait()
        try:
            written.append(recovery.recover_runs(root))
        except Exception as exc:
            errors.append(repr(exc))

    threads = [threading.Thread(target=recover) for _ in range(RECOVERERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    every = [path for paths in written for path in paths]
    assert len(every) == len(set(every)) == RUNS  # each run by exactly one recoverer
    assert {load_run(p).run_id for p in every} == ids
    assert all(load_run(p).status == "invalid" for p in every)
    assert not list(root.glob(f"*/harness/{recovery.MARKER}"))
    assert recovery.recover_runs(root) == []


def test_an_unreadable_marker_costs_its_own_run_only(tmp_path: Path) -> None:
    root, results = tmp_path / "runs", tmp_path / "results"
    pid = _dead_pid()
    good = _dead_run(root, results, 1, pid)
    bad = root / "20261207T120000-model-a-s2-dead" / "harness"
    bad.mkdir(parents=True)
    (bad / recovery.MARKER).write_text("{not json")
    [path] = recovery.recover_runs(root)
    assert load_run(path).run_id == good
    assert (bad / recovery.MARKER).read_text() == "{not json"  # left for the operator
