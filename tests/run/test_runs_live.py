"""`toolkit runs list / show / tail / kill` on a real run of this host."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from toolkit.results.model import load_run
from toolkit.run.live import read_live

REPO = Path(__file__).resolve().parents[2]
TOOLKIT = str(Path(sys.executable).parent / "toolkit")


def _toolkit(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TOOLKIT, *args], capture_output=True, text=True, env=env, timeout=300, check=False
    )


def test_list_show_tail_and_kill_a_running_run(tmp_path: Path) -> None:
    results = tmp_path / "results"
    env = {**os.environ, "ARI_HOME": str(tmp_path / "home")}
    env.pop("ARI_RESULTS_DIR", None)
    run = subprocess.Popen(
        [TOOLKIT, "run", "--agent", "scripted", "--track", "demo-cpu-3", "--seed", "4",
         "--budget", "120", "--device", "cpu", "--quiet", "--results", str(results)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while True:
            listed = _toolkit(env, "runs", "list", "--json")
            records = [json.loads(line) for line in listed.stdout.splitlines()]
            if any(r["state"] == "running" for r in records):
                break
            assert run.poll() is None and time.monotonic() < deadline, listed.stdout
            time.sleep(0.5)
        (record,) = records
        run_id = record["run_id"]
        assert record["model"] == "scripted-baseline" and record["track"] == "demo-cpu-3"
        table = _toolkit(env, "runs", "list")
        assert run_id in table.stdout and "running" in table.stdout, table.stdout
        shown = _toolkit(env, "runs", "show", run_id[:20])
        assert shown.returncode == 0 and "state: running" in shown.stdout, shown
        # The harness says what the run does now, for `toolkit view` (toolkit.run.live): the
        # scripted agent's training call is in flight within seconds of its start.
        harness = tmp_path / "home" / "runs" / run_id / "harness"
        seen: list[dict[str, object]] = []
        until = time.monotonic() + 60
        while not any(s.get("calls") for s in seen) and time.monotonic() < until:
            seen.append(read_live(harness))
            time.sleep(0.2)
        live = seen[-1]
        assert live.get("step") == "the agent's session" and live.get("grading") is False, seen
        calls = live["calls"]
        assert isinstance(calls, list) and calls and calls[0]["argv"][0], live
        assert "transcript.txt" in live["console"]  # type: ignore[operator]
        tail = _toolkit(env, "runs", "tail", run_id)
        assert tail.returncode == 0 and "controller isolation" in tail.stdout, tail.stdout
        killed = _toolkit(env, "runs", "kill", run_id)
        assert killed.returncode == 0, killed.stdout + killed.stderr
        assert run.wait(60) != 0
    finally:
        if run.poll() is None:
            run.kill()
    (path,) = (results / "demo-cpu-3").glob("*.json")
    result = load_run(path)
    assert result.status == "invalid" and result.interrupted
    assert "(the operator: toolkit runs kill)" in (result.status_reason or "")
    listed = _toolkit(env, "runs", "list", "--json")
    assert '"state": "invalid"' in listed.stdout
    again = _toolkit(env, "runs", "kill", run_id)
    assert again.returncode == 1 and "is not running" in again.stderr


def test_an_unknown_run_is_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "ARI_HOME": str(tmp_path / "home")}
    done = _toolkit(env, "runs", "show", "nope")
    assert done.returncode == 1 and "no run 'nope' on this host" in done.stderr
    assert "no runs on this host yet" in _toolkit(env, "runs", "list").stdout
