"""The cgroup-v2 kill and removal of the local backend against a real kernel, on any host.

A cgroup-v1 host (this one, CI) can still mount the unified hierarchy: its controllers stay
with v1, but `cgroup.procs`, `cgroup.kill` and `cgroup.events` are the kernel's own. So what a
fake tree cannot show is checked here for real: a tree that forks as fast as it can, with a
grandchild in its own session (out of reach of a process-group kill), is killed whole by
`ProcessCgroups.kill_all` through `cgroup.kill`; `populated` turns 0; the cgroup is removed.
And a parent that claims a controller it does not have (a bad delegation) is refused by the
kernel when a limit is written: the half-made cgroup is removed, not left behind.
The toolkit's own top-level cgroup (layout `top` of `toolkit/sandbox/local/cgroups.py`) is
checked here too, with `hugetlb` (the one controller this v1 host leaves to the unified
hierarchy) standing in for memory, pids and cpu: a test cgroup plays the hierarchy's root, a
child of it that gets nothing plays this process's non-delegating cgroup. The layout is found,
the top made, a forking tree moved in, killed, and the top removed with its last tree; the
"harness" and a stranger's cgroup are never touched; an ancestor holding processes is refused
by the kernel (no internal processes) and nothing is left behind.
The limits themselves (memory.max, pids.max, cpu.max) need the controllers: those are checked
on a v2 host by tests/sandbox/test_cgroup2_real.py (`scripts/check-cgroup2.sh`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolkit.sandbox.local import cgroups as layouts
from toolkit.sandbox.local import host as local_host

MS_NOSUID, MS_NODEV, MS_NOEXEC = 2, 4, 8

# Joins the cgroup named in argv[1], then forks: children that sleep, a grandchild in its own
# session, and a forker that keeps making more.
SWARM = r"""
import os, sys, time
with open(sys.argv[1], "w") as f:
    f.write(str(os.getpid()))
for _ in range(5):
    if os.fork() == 0:
        time.sleep(600)
        os._exit(0)
escaper = os.fork()
if escaper == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(600)
    os._exit(0)
os.waitpid(escaper, 0)  # its grandchild is in a session of its own before "ready"
if os.fork() == 0:
    while True:
        try:
            if os.fork() == 0:
                time.sleep(600)
                os._exit(0)
        except OSError:
            pass
        time.sleep(0.01)
print("ready", flush=True)
time.sleep(600)
"""


@pytest.fixture
def unified(tmp_path: Path) -> Iterator[Path]:
    """A cgroup of our own in a fresh mount of the unified (v2) hierarchy."""
    if os.geteuid() != 0:
        pytest.skip("mounting cgroup2 needs root")
    mount = tmp_path / "cgroup2"
    mount.mkdir()
    libc = ctypes.CDLL(None, use_errno=True)
    flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
    if libc.mount(b"none", str(mount).encode(), b"cgroup2", flags, None) != 0:
        pytest.skip(f"this kernel would not mount cgroup2: {os.strerror(ctypes.get_errno())}")
    here = mount / f"ari-test-{uuid.uuid4().hex[:8]}"
    enabled_before = set((mount / "cgroup.subtree_control").read_text().split())
    try:
        here.mkdir()
        if not (here / "cgroup.kill").exists():
            pytest.skip("no cgroup.kill (Linux before 5.14)")
        yield here
    finally:  # whatever a failed test left: killed with the whole subtree, then removed
        with contextlib.suppress(OSError):
            (here / "cgroup.kill").write_text("1")
        deadline = time.monotonic() + 10
        with contextlib.suppress(OSError):
            while "populated 1" in (here / "cgroup.events").read_text():
                if time.monotonic() > deadline:
                    break
                time.sleep(0.01)
        for child in sorted(here.glob("**/"), key=lambda p: -len(p.parts)):
            with contextlib.suppress(OSError):
                child.rmdir()
        # What a test enabled at the hierarchy's root is turned off again.
        for name in set((mount / "cgroup.subtree_control").read_text().split()) - enabled_before:
            with contextlib.suppress(OSError):
                (mount / "cgroup.subtree_control").write_text(f"-{name}")
        libc.umount2(str(mount).encode(), 2)  # MNT_DETACH


def _support(
    memory_parent: Path | None = None, pids_parent: Path | None = None
) -> local_host.HostSupport:
    return local_host.HostSupport(
        namespaces=True,
        userns=False,
        is_root=True,
        pids_parent=pids_parent,
        memory_parent=memory_parent,
        cgroup2=True,
    )


def _cgroups(directory: Path) -> local_host.ProcessCgroups:
    """The cgroups object of a tree whose v2 cgroup is `directory` (made by the caller: this
    hierarchy has no controllers for ProcessCgroups to write limits with)."""
    support = _support()
    cgroups = local_host.ProcessCgroups(support, None, None)
    assert cgroups.dirs == []  # no limits asked: no cgroup made
    cgroups.dirs.append(directory)
    return cgroups


def test_cgroup_kill_takes_a_forking_tree_down_whole(unified: Path) -> None:
    tree = unified / "tree"
    tree.mkdir()
    swarm = subprocess.Popen(
        [sys.executable, "-c", SWARM, str(tree / "cgroup.procs")], stdout=subprocess.PIPE
    )
    try:
        assert swarm.stdout is not None and swarm.stdout.readline() == b"ready\n"
        cgroups = _cgroups(tree)
        deadline = time.monotonic() + 10
        while len(cgroups.pids()) < 10 and time.monotonic() < deadline:
            time.sleep(0.05)
        members = cgroups.pids()
        assert len(members) >= 10, members
        assert "populated 1" in (tree / "cgroup.events").read_text()

        cgroups.kill()  # one write to cgroup.kill, no signal to any pid
        deadline = time.monotonic() + 10
        while "populated 1" in (tree / "cgroup.events").read_text():
            assert time.monotonic() < deadline, f"still populated: {cgroups.pids()}"
            time.sleep(0.01)
        assert cgroups.pids() == set()
        assert cgroups.kill_all(deadline_s=10)  # nothing left to do
        for pid in members:  # every member is gone (or a zombie of this test's own child)
            status = Path(f"/proc/{pid}/status")
            assert not status.exists() or "State:\tZ" in status.read_text(), pid
        cgroups.remove()
        assert not tree.exists() and cgroups.dirs == []
    finally:
        swarm.kill()
        swarm.wait()


def test_kill_without_cgroup_kill_would_leave_the_session_escapee(unified: Path) -> None:
    # The attack the test above defeats, shown to be real: SIGKILL to the swarm's process group
    # (what a harness without cgroups could do) leaves members alive in the cgroup.
    tree = unified / "tree"
    tree.mkdir()
    swarm = subprocess.Popen(
        [sys.executable, "-c", SWARM, str(tree / "cgroup.procs")],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert swarm.stdout is not None and swarm.stdout.readline() == b"ready\n"
        os.killpg(swarm.pid, 9)
        swarm.wait()
        time.sleep(0.2)
        cgroups = _cgroups(tree)
        assert cgroups.pids(), "nothing outlived a process-group kill: the swarm is too weak"
        assert cgroups.kill_all(deadline_s=10) and cgroups.pids() == set()
        cgroups.remove()
        assert not tree.exists()
    finally:
        if tree.exists():
            (tree / "cgroup.kill").write_text("1")


def test_a_limit_the_parent_does_not_offer_is_refused_and_leaves_no_cgroup(
    unified: Path,
) -> None:
    # A parent that says it delegates memory and pids but, in truth, has neither controller.
    offered = set((unified / "cgroup.controllers").read_text().split())
    if {"memory", "pids"} & offered:
        pytest.skip("this hierarchy has memory or pids: not a bad delegation")
    support = _support(memory_parent=unified, pids_parent=unified)
    before = sorted(p.name for p in unified.iterdir() if p.is_dir())
    with pytest.raises(OSError):
        local_host.ProcessCgroups(support, memory_bytes=1 << 30, max_processes=100)
    assert sorted(p.name for p in unified.iterdir() if p.is_dir()) == before


STAND_IN = ("hugetlb",)
"""The controller the layout tests hand down (memory, pids and cpu are v1's on this host)."""


def _words(file: Path) -> set[str]:
    return set(file.read_text().split())


def _offer_stand_in(unified: Path) -> None:
    """The hierarchy's root hands the stand-in controller down (undone by `unified`)."""
    mount = unified.parent
    if not set(STAND_IN) <= _words(mount / "cgroup.controllers"):
        pytest.skip(f"this kernel's unified hierarchy has no {' '.join(STAND_IN)}")
    (mount / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in STAND_IN))


def _sleeper(cgroup: Path) -> subprocess.Popen[bytes]:
    """A process that lives in `cgroup` (moved there by this test, as the host had it)."""
    proc = subprocess.Popen(["sleep", "600"])
    (cgroup / "cgroup.procs").write_text(str(proc.pid))
    return proc


def _top_support(layout: layouts.CgroupLayout) -> local_host.HostSupport:
    return local_host.HostSupport(
        namespaces=True,
        userns=False,
        is_root=True,
        pids_parent=None,
        memory_parent=None,
        cgroup2=True,
        cgroups=layout,
    )


def _tree_cgroup(layout: layouts.CgroupLayout) -> local_host.ProcessCgroups:
    """A tree's cgroups in the layout's top cgroup, made the way `ProcessCgroups` makes them
    (no limit files to write: the stand-in controller has none of memory, pids, cpu)."""
    cgroups = local_host.ProcessCgroups(_top_support(layout), None, None)
    assert layout.memory is not None
    cgroups._top, cgroups._wanted = layout.memory, layout.wanted
    directory = layout.memory / f"ari-sandbox-{uuid.uuid4().hex[:12]}"
    cgroups._make_dir(directory)
    cgroups.dirs.append(directory)
    return cgroups


def test_the_own_top_cgroup_on_a_real_kernel(unified: Path, tmp_path: Path) -> None:
    _offer_stand_in(unified)
    own, foreign = unified / "own", unified / "foreign"
    own.mkdir()
    foreign.mkdir()
    harness, stranger = _sleeper(own), _sleeper(foreign)
    swarms: list[subprocess.Popen[bytes]] = []
    try:
        assert not set(STAND_IN) & _words(own / "cgroup.controllers")  # not handed down
        (tmp_path / "self").write_text("0::/own\n")
        layout = layouts.find_layout(unified, tmp_path / "self", STAND_IN)
        top = unified / layouts.TOP
        assert layout.kind == "top" and layout.memory == top, layout
        assert not top.exists()  # the probe left nothing
        assert set(STAND_IN) <= _words(unified / "cgroup.subtree_control")
        trees = [_tree_cgroup(layout), _tree_cgroup(layout)]
        assert top.is_dir() and set(STAND_IN) <= _words(top / "cgroup.subtree_control")
        for cgroups in trees:
            [directory] = cgroups.dirs
            assert set(STAND_IN) <= _words(directory / "cgroup.controllers")
            swarm = subprocess.Popen(
                [sys.executable, "-c", SWARM, str(directory / "cgroup.procs")],
                stdout=subprocess.PIPE,
            )
            swarms.append(swarm)
            assert swarm.stdout is not None and swarm.stdout.readline() == b"ready\n"
        first, second = trees
        assert first.kill_all(deadline_s=10) and first.pids() == set()
        [gone] = first.dirs
        first.remove()
        assert not gone.exists() and top.is_dir()  # the second tree keeps the top
        assert second.kill_all(deadline_s=10)
        second.remove()
        assert not top.exists()  # removed with its last tree
        # Only the trees' processes moved and died: the harness and the stranger did not.
        assert harness.poll() is None and stranger.poll() is None
        assert _words(own / "cgroup.procs") == {str(harness.pid)}
        assert _words(foreign / "cgroup.procs") == {str(stranger.pid)}
        assert [p.name for p in own.iterdir() if p.is_dir()] == []
        assert [p.name for p in foreign.iterdir() if p.is_dir()] == []
        assert _words(own / "cgroup.subtree_control") == set()
    finally:
        for proc in [harness, stranger, *swarms]:
            proc.kill()
            proc.wait()


def test_an_ancestor_holding_processes_is_refused_and_nothing_is_left(
    unified: Path, tmp_path: Path
) -> None:
    _offer_stand_in(unified)
    own = unified / "own"
    own.mkdir()
    harness, internal = _sleeper(own), _sleeper(unified)  # the ancestor holds a process
    try:
        (tmp_path / "self").write_text("0::/own\n")
        layout = layouts.find_layout(unified, tmp_path / "self", STAND_IN)
        assert layout.kind == "none", layout
        assert "cannot hand controllers down" in layout.why, layout.why
        assert not (unified / layouts.TOP).exists()
        assert _words(unified / "cgroup.procs") == {str(internal.pid)}  # nobody was moved
        assert _words(own / "cgroup.procs") == {str(harness.pid)}
    finally:
        for proc in (harness, internal):
            proc.kill()
            proc.wait()
