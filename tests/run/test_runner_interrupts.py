"""Interrupted calls and a run that ends under them, hammered for a few seconds.

An agent's interrupt must be on record as `cancelled`, however its client died: Ctrl-C, a
signal to the client's whole process group (its readers die before it sends `cancel`), or its
readers simply gone before the line comes. And when the runner's sandbox is torn down while
calls are still being served, every call keeps exactly one honest audit entry, nothing counts
as an infrastructure failure of ours, and no descriptor of another thread is closed: a thread
that waited on a process while another killed it used to fail with EBADF ("runner error: Bad
file descriptor", the run then invalid), or close a number another thread had just reused.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.bystander import Bystander
from tests.run.runner_env import Env, make_env
from toolkit.clock import Clock
from toolkit.runner.service import CANCELLED, KILLED

TICKS = "while :; do echo tick; sleep 0.01; done"
# The client as a terminal would start it: SIGINT at its default even where the test runner
# was started with SIGINT ignored (a shell cannot trap a signal ignored when it started).
DEFAULT_SIGINT = (
    "import os, signal, sys; signal.signal(2, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])"
)


def _clock() -> Clock:
    # A per-call limit far beyond the test: a call can only end by the interrupt.
    return Clock(budget_s=3600, reserved_s=60, per_call_limit_s=600)


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    yield from make_env(tmp_path, _clock(), submissions=False)


def _start_client(env: Env, *argv: str, session: bool = False) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", DEFAULT_SIGINT, str(env.client), *argv],
        cwd=env.workspace,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=session,
    )


def test_interrupts_are_recorded_as_cancelled(env: Env) -> None:
    """Ctrl-C (SIGINT to the client) and a tool's timeout (SIGTERM to its process group, which
    kills the readers before the client's `cancel`), each while output streams."""
    rounds = 12
    for n in range(rounds):
        proc = _start_client(env, "sh", "-c", TICKS, session=True)
        assert proc.stdout is not None and proc.stdout.readline() == "tick\n"
        if n % 2:
            os.killpg(proc.pid, signal.SIGTERM)
        else:
            proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    entries = env.wait_entries(rounds)
    assert [e["note"] for e in entries] == [CANCELLED] * rounds
    # Killed at the agent's request: 124 like timeout(1), however fast its processes died.
    assert [e["exit_code"] for e in entries] == [KILLED] * rounds
    assert all(e["end_s"] - e["start_s"] < 20 for e in entries)
    assert env.service.infra_errors == []


def test_cancel_that_comes_after_the_readers_died(env: Env) -> None:
    """The client's readers are gone (the harness sees EPIPE) before its `cancel` line."""
    raw = env.raw("Late0001").make(f"sh\0-c\0{TICKS}\0".encode())
    raw.send()
    err = os.open(raw.folder / "err", os.O_RDONLY)  # blocks until the harness opens it
    out = os.open(raw.folder / "out", os.O_RDONLY)
    try:
        assert os.read(out, 5) == b"tick\n"
    finally:
        os.close(out)
        os.close(err)
    time.sleep(0.3)  # the harness writes into the closed FIFOs meanwhile
    raw.send(b"cancel Late0001")
    (entry,) = env.wait_entries(1)
    assert entry["note"] == CANCELLED and entry["exit_code"] == KILLED


def test_calls_in_flight_when_the_runner_sandbox_is_torn_down(tmp_path: Path) -> None:
    bystander = Bystander()
    for round_ in range(4):
        gen = make_env(tmp_path / f"r{round_}", _clock(), submissions=False)
        env = next(gen)
        try:
            procs = [_start_client(env, "sh", "-c", f"echo go{n}; sleep 60") for n in range(6)]
            for proc in procs:
                assert proc.stdout is not None and proc.stdout.readline().startswith("go")
            env.box.cleanup()  # the teardown, while every call's thread waits on its process
            entries = env.wait_entries(len(procs))
            for proc in procs:
                proc.wait(timeout=30)
            assert env.service.infra_errors == []
            assert len({e["call"] for e in entries}) == len(procs) == len(entries)
            assert all(e["exit_code"] != 0 for e in entries)
        finally:
            gen.close()
    assert bystander.stop() == 0
