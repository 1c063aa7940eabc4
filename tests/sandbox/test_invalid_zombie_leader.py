"""A killed tree takes its "zombie leaders" with it: processes whose main thread has exited
while another thread runs on.

/proc shows such a process as a zombie ("Z"), though it lives and may have children. A kill
that walked the tree past zombies never reached it: where there is no PID namespace (a host
without namespaces) the setsid'd ones outlived the kill for good, and everywhere the walk ended
early, so the slow-teardown attack (`tests/teardown_attack.py`) was seen as a failure of the
sandbox. The walk and the wait now count a "Z" process with live threads as alive.
"""

from __future__ import annotations

import os
import time

from tests.sandbox.conftest import PY
from toolkit.sandbox import Sandbox

SCRIPT = """
import ctypes, os, sys, threading, time
libc = ctypes.CDLL(None)
libc.pthread_exit.argtypes = [ctypes.c_void_p]
for _ in range(3):
    if os.fork() == 0:
        os.setsid()
        threading.Thread(target=time.sleep, args=(3600,)).start()
        libc.pthread_exit(None)
print("ready", flush=True)
time.sleep(3600)
"""


def live_threads_with(marker: str) -> list[str]:
    """Host threads still running a command line that holds `marker` (a zombie leader's own
    command line reads empty: its live threads' do not)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            tids = os.listdir(f"/proc/{entry}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{entry}/task/{tid}/cmdline", "rb") as f:
                    if marker.encode() in f.read():
                        found.append(f"{entry}/{tid}")
            except OSError:
                continue
    return found


def test_kill_takes_zombie_leaders_with_live_threads(box: Sandbox, marker: str) -> None:
    process = box.start([PY, "-c", SCRIPT, marker], stdin=False, stderr=False)
    assert process.stdout is not None and process.stdout.readline() == b"ready\n"
    assert len(live_threads_with(marker)) >= 4  # the parent and three zombie leaders' threads
    process.kill()
    deadline = time.monotonic() + 5
    while live_threads_with(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert live_threads_with(marker) == []
