"""The suite's private dockerd dies with the session that started it, even one killed without
its teardown (issue 39: a `make test` stopped with Ctrl-C left its dockerd running). Checked
with a stand-in for dockerd (`sleep`), so it needs no Docker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.waiting import wait_for

# A session that starts its "engine" as tests/docker_engine.py does, says its pid, and waits.
SESSION = """
import os, subprocess, sys, time
sys.path.insert(0, sys.argv[1])
from tests.docker_engine import die_with_parent
child = subprocess.Popen(["sleep", "300"], start_new_session=True,
                         preexec_fn=die_with_parent(os.getpid()))
print(child.pid, flush=True)
time.sleep(300)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_the_engine_dies_with_a_session_killed_without_teardown() -> None:
    repo = str(Path(__file__).resolve().parents[1])
    session = subprocess.Popen(
        [sys.executable, "-c", SESSION, repo], stdout=subprocess.PIPE, text=True
    )
    assert session.stdout is not None
    engine = int(session.stdout.readline())
    try:
        assert _alive(engine)
        session.send_signal(signal.SIGKILL)  # no teardown runs
        session.wait(timeout=30)
        assert wait_for(lambda: not _alive(engine), timeout=30), "the engine outlived it"
    finally:
        if _alive(engine):
            os.kill(engine, signal.SIGKILL)
