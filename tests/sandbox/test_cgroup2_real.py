"""cgroup v2 in the local backend on a real cgroup-v2 host (skipped elsewhere, with the reason).

Runs where the probe found a v2 layout (`toolkit/sandbox/local/cgroups.py`: a delegated
subtree, e.g. under `systemd-run --scope -p Delegate=yes`, or as root the toolkit's own
top-level cgroup): each tree's memory, process and CPU caps are the kernel's, a kill takes the
whole tree down through `cgroup.kill`, and the toolkit's own top-level cgroup goes with its
last tree. `scripts/check-cgroup2.sh` runs this module.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from toolkit.sandbox import Limits, create_sandbox
from toolkit.sandbox.local import LocalSandbox, process
from toolkit.sandbox.local import host as local_host

PY = sys.executable


def _v2_parent() -> Path | None:
    support = local_host.probe()
    return support.memory_parent if support.cgroup2 else None


def _here() -> str:
    if not local_host.is_cgroup2():
        return "not pure cgroup v2"
    layout = local_host.probe().cgroups
    return layout.describe() if layout is not None else "not probed"


pytestmark = pytest.mark.skipif(
    not local_host.is_cgroup2() or _v2_parent() is None,
    reason=f"needs a cgroup-v2 host where trees get cgroups (this host: {_here()})",
)

EAT = "import sys; chunks = [bytearray(1 << 20) for _ in range(int(sys.argv[1]))]; print('ate')"


def test_the_memory_cap_holds_for_the_whole_tree(root: Path) -> None:
    # Two processes of 150 MiB each under a 256 MiB cap: each alone fits, together they don't.
    limits = Limits(memory_bytes=256 << 20, max_processes=100)
    script = f'{PY} -c "{EAT}" 150 & {PY} -c "{EAT}" 150 & wait'
    with create_sandbox("local", root=root, limits=limits) as box:
        assert isinstance(box, LocalSandbox)
        assert {"cgroup2", "cgroup-memory", "cgroup-pids"} <= set(box.isolation)
        assert "as" not in box._rlimits()
        out = box.exec(["sh", "-c", "sleep 0.5; " + script], timeout=120)
    assert out.stdout.count(b"ate") < 2


def test_the_process_cap_holds(root: Path) -> None:
    limits = Limits(max_processes=20)
    code = """
import os, time
n = 0
try:
    for _ in range(200):
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        n += 1
except OSError:
    pass
print(n)
"""
    with create_sandbox("local", root=root, limits=limits) as box:
        out = box.exec([PY, "-c", code], timeout=120)
    assert int(out.stdout) < 20


def test_a_kill_takes_the_whole_tree_and_its_cgroup(root: Path) -> None:
    limits = Limits(memory_bytes=1 << 30, max_processes=200, cpus=1.0)
    forker = """
import os, time
while True:
    if os.fork() == 0:
        time.sleep(60)
    time.sleep(0.01)
"""
    with create_sandbox("local", root=root, limits=limits) as box:
        running = box.start([PY, "-c", forker])
        assert isinstance(running, process.LocalProcess)
        [directory] = running._cgroups.dirs
        assert (directory / "cpu.max").read_text().split() == ["100000", "100000"]
        swap = directory / "memory.swap.max"
        assert not swap.exists() or swap.read_text().strip() == "0"
        running.kill()
        box.cleanup()
    assert not directory.exists()
    top = local_host.probe().cgroup_top
    if top is not None:  # gone with its last tree (unless a concurrent run has one in it)
        assert not top.exists() or any(p.is_dir() for p in top.iterdir())
