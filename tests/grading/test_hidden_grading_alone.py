"""Issue #50, item 5: a run's hidden grading on an official track waits until no other run's
session is live on its host, and says so in its result.

Another run's session is a process holding the host lock shared (`grading_lock`); the run's
grading may start only once it lets go: `finished_at` (the grading's start) comes after.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from grading_helpers import ORACLE, code_questions, run_spec, submit_and_promote

from toolkit.host import grading_lock
from toolkit.run.orchestrate import execute_run

REPO = Path(__file__).resolve().parents[2]
HOLD_S = 1.0
"""How long the other run's session lasts once this run's grading waits for it."""
LIMIT_S = 120.0
"""The most the other session waits for this run's grading to wait for it."""

HOLDER = """
import sys
from pathlib import Path
from toolkit.host.grading_lock import HostLock
lock = HostLock(Path(sys.argv[1]))
lock.share()
print("shared", flush=True)
sys.stdin.read()
"""


def test_an_official_hidden_grading_waits_for_the_other_runs_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "host-lock"
    monkeypatch.setenv(grading_lock.DIR_ENV, str(folder))
    monkeypatch.setenv(grading_lock.ACCEPT_ENV, "")
    exam = tmp_path / "exam" / "exam.jsonl"
    exam.parent.mkdir()
    lines = [json.dumps(q, sort_keys=True, separators=(",", ":")) + "\n" for q in code_questions(6)]
    exam.write_text("".join(lines))
    spec = run_spec(submit_and_promote(ORACLE), exam, tmp_path)
    spec = dataclasses.replace(spec, track=spec.track.model_copy(update={"demo": False}))
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(folder)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    assert holder.stdout is not None and holder.stdout.readline() == "shared\n"
    released: list[datetime] = []
    said: list[str] = []  # the run's grading said it waits (its stamped log line, echoed)
    go = threading.Event()  # the other session may end now

    def heard(line: str) -> None:
        if "waiting for the other runs on this host to end" in line:
            said.append(line)
            go.set()

    def end_session_later() -> None:
        # The other session ends a moment after the grading began to wait for it (a fixed
        # 15 s, meant to outlast this run's session, held the test that long).
        go.wait(LIMIT_S)
        time.sleep(HOLD_S)
        released.append(datetime.now(UTC))
        assert holder.stdin is not None
        holder.stdin.close()

    ender = threading.Thread(target=end_session_later)
    ender.start()
    try:
        result = execute_run(spec, echo=heard)
    finally:
        go.set()  # a run that never waited is over: no need to hold the other session on
        ender.join()
        holder.wait(30)
    assert said, "the grading never waited for the other session"
    assert result.status == "valid", result.status_reason
    assert "hidden-grading-alone" in result.config.isolation
    assert result.finished_at is not None and result.finished_at >= released[0]
    # It asked while the other session was live (said before the grading, in agent.log).
    log = (tmp_path / "results" / result.track / result.artifacts["agent_log"]).read_text()
    assert "waiting for the other runs on this host to end" in log, log
