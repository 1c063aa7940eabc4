"""The teardown bound is a verdict on the tree, whatever the box's load.

A killed tree that is still there `teardown_wait_s()` after SIGKILL is a
`SandboxTeardownTimeout` (the run then checks the harness's reference bundle and charges the
failure to the bundle). On a loaded box the harness's own walk of a dying swarm (tens of
thousands of mappings a child) once took 15 s against a bound of 2 s; everything was gone when
the walk ended, the tree was let off, and the same bundle that fails on an idle box made a
`valid` run (CI saw it). Here the walk is slowed as load slows it: the verdict must not change.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from toolkit.sandbox import SandboxTeardownTimeout, create_sandbox
from toolkit.sandbox.base import TEARDOWN_ENV
from toolkit.sandbox.local import process as process_module
from toolkit.sandbox.local.launcher import descendants

TREE = ["sh", "-c", "sleep 60 & sleep 60 & wait"]


def _slow_walk(seconds: float) -> object:
    def walk(pid: int) -> list[int]:
        found = descendants(pid)
        if found:
            time.sleep(seconds)  # the walk as a loaded box runs it, while the tree dies
        return found

    return walk


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _start(box: object) -> process_module.LocalProcess:
    process = box.start(TREE, stdin=False)  # type: ignore[attr-defined]
    assert isinstance(process, process_module.LocalProcess)
    deadline = time.monotonic() + 10
    while len(descendants(process.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    return process


def test_a_teardown_longer_than_the_bound_is_a_timeout_even_if_it_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TEARDOWN_ENV, "0.3")
    with create_sandbox("local", root=tmp_path) as box:
        process = _start(box)
        pids = [process.pid, *descendants(process.pid)]
        monkeypatch.setattr(process_module, "descendants", _slow_walk(0.6))
        with pytest.raises(SandboxTeardownTimeout):
            process.kill()
        assert process.teardown_s > 0.3
        monkeypatch.setattr(process_module, "descendants", descendants)
    # The walk was not cut short: nothing of the tree lives on (a zombie waits for its reaper).
    assert [pid for pid in pids if _running(pid)] == []


def test_a_teardown_within_the_bound_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TEARDOWN_ENV, "5")
    with create_sandbox("local", root=tmp_path) as box:
        process = _start(box)
        process.kill()
        assert process.wait(5) is not None
        assert process.teardown_s < 5
