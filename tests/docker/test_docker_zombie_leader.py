"""A call's kill in a container takes its "zombie leaders" with it (processes whose main
thread exited while another thread runs on: /proc shows them as zombies). The container's init
used to skip them, so a runner call's setsid'd zombie leaders outlived the call's time limit and
kept computing past it (and past the per-call limit of every later call)."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

from tests.sandbox.test_invalid_zombie_leader import SCRIPT, live_threads_with
from toolkit.sandbox import create_sandbox


def test_a_timed_out_call_leaves_no_zombie_leader(root: Path) -> None:
    marker = f"ari-marker-{uuid.uuid4().hex}"
    with create_sandbox("docker", root=root) as box:
        done = box.exec(["python3", "-c", SCRIPT, marker], timeout=3)
        assert done.timed_out and done.stdout == b"ready\n", done
        deadline = time.monotonic() + 10
        while live_threads_with(marker) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = live_threads_with(marker)
        assert left == [], f"{len(left)} threads of the call outlived it (pid {os.getpid()})"
