"""Issue #50, item 5: what one sandbox does to the kernel's per-user and host-wide counters, or
to a file every sandbox may read, is not seen by a sandbox beside it.

Each attack is a sender that holds something (inotify instances, a watch's events, inodes,
descriptors, file locks) and a receiver that reads what would tell: the receiver's reading
while the sender holds it must be the same as while nobody does. The rates of what stays
(a flock on a shared file, Shmem, the task count of /proc/loadavg, free memory, CPU time) are
measured by scripts/measure-host-channel.py and stated in site/docs/security/channels.md;
a hidden grading is kept alone on its host against them (`toolkit.host.grading_lock`).
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

from toolkit.sandbox import Limits, Sandbox, create_sandbox, uids

PY = sys.executable
LIMITS = Limits(memory_bytes=512 * 2**20, max_processes=256)

# The sender sets up what it holds, prints "ready", and holds it until its stdin closes.
HOLD = r"""
import ctypes, fcntl, os, sys
libc = ctypes.CDLL(None, use_errno=True)
what = sys.argv[1]
held = []
if what == "inotify":
    while len(held) < 4096:
        fd = libc.inotify_init1(0)
        if fd < 0:
            break
        held.append(fd)
elif what == "files":
    os.makedirs("/tmp/many", exist_ok=True)
    for i in range(3000):
        held.append(os.open(f"/tmp/many/{i}", os.O_CREAT | os.O_RDONLY))
    fcntl.flock(held[0], fcntl.LOCK_EX)  # a lock of its own: /proc/locks lists every lock
    held.append(libc.syscall(206, 64, ctypes.byref(ctypes.c_ulong(0))))  # io_setup: aio-nr
    for _ in range(50):  # the host's fork count and running tasks (/proc/stat)
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
    import threading  # the task count (/proc/loadavg)
    done = threading.Event()
    for _ in range(64):
        threading.Thread(target=done.wait, daemon=True).start()
elif what == "read":
    pass
print("ready", flush=True)
if what == "read":  # read a file every sandbox sees, until told to stop
    import select
    while not select.select([sys.stdin], [], [], 0)[0]:
        with open("/etc/passwd", "rb") as f:
            f.read(1)
sys.stdin.read()
"""

# What the receiver reads: how many inotify instances it may make; the events of a watch (and
# of dnotify) on a shared file while the sender reads it; the host-wide counters.
OBSERVE = r"""
import ctypes, fcntl, os, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
what = sys.argv[1]
if what == "inotify":
    fds = []
    while len(fds) < 4096:
        fd = libc.inotify_init1(0)
        if fd < 0:
            break
        fds.append(fd)
    print(len(fds))
elif what == "watch":
    seen = []
    fd = libc.inotify_init1(os.O_NONBLOCK)
    if fd >= 0 and libc.inotify_add_watch(fd, b"/etc/passwd", 0x1 | 0x20) >= 0:
        time.sleep(0.5)
        try:
            seen.append(len(os.read(fd, 65536)))
        except OSError:
            pass
    signal.signal(signal.SIGIO, lambda *_: seen.append("dnotify"))
    folder = os.open("/etc", os.O_RDONLY)
    try:
        fcntl.fcntl(folder, fcntl.F_NOTIFY, fcntl.DN_ACCESS | fcntl.DN_MULTISHOT)
        time.sleep(0.5)
    except OSError:
        pass
    print(seen)
else:
    for path in ("/proc/sys/fs/inode-nr", "/proc/sys/fs/inode-state", "/proc/sys/fs/file-nr",
                 "/proc/sys/fs/dentry-state", "/proc/sys/fs/aio-nr", "/proc/locks", "/proc/stat",
                 "/proc/loadavg", "/proc/pressure/cpu", "/proc/vmstat"):
        try:
            with open(path) as f:
                print(path, f.read())
        except OSError as e:
            print(path, e.errno)
"""


def _boxes(tmp_path: Path) -> tuple[Sandbox, Sandbox]:
    roots = [tmp_path / "sender", tmp_path / "receiver"]
    for root in roots:
        root.mkdir()
    return (
        create_sandbox("local", root=roots[0], limits=LIMITS),
        create_sandbox("local", root=roots[1], limits=LIMITS),
    )


def _needs_namespaces(box: Sandbox) -> None:
    if "mountns" not in box.isolation:
        pytest.skip(f"this host gives no namespaces (not_isolated: {box.not_isolated})")


def _observed(sender: Sandbox, receiver: Sandbox, hold: str, observe: str) -> tuple[str, str]:
    """What the receiver reads with the sender idle, then while the sender holds `hold`."""
    idle = receiver.exec([PY, "-c", OBSERVE, observe], timeout=120)
    assert idle.returncode == 0, idle
    holder = sender.start([PY, "-c", HOLD, hold], stdin=True)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == b"ready"
        busy = receiver.exec([PY, "-c", OBSERVE, observe], timeout=120)
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(60)
    assert busy.returncode == 0, busy
    return idle.stdout.decode(), busy.stdout.decode()


def test_each_sandbox_runs_as_a_uid_of_its_own(tmp_path: Path) -> None:
    """Two sandboxes on two roots: two uids, claimed host-wide; on one root in one process
    (a run's controller and runner): one; given back when the last one is cleaned up."""
    (tmp_path / "shared").mkdir()
    first, second = _boxes(tmp_path)
    with first, second, create_sandbox("local", root=tmp_path / "shared") as third:
        _needs_namespaces(first)
        if "uid:own" not in first.isolation:
            pytest.skip("not root: commands run as the caller's uid")
        with create_sandbox("local", root=tmp_path / "shared") as fourth:
            ids = [box.exec(["id", "-u"]).stdout.strip() for box in (first, second, third, fourth)]
        assert ids[0] != ids[1] and ids[2] == ids[3], ids
        assert len({ids[0], ids[1], ids[2]}) == 3, ids
        assert all(int(i) in uids.uid_range() for i in ids), ids
        held = int(ids[2])
    # Given back: another process may take it now.
    fd = uids._try(held, uids.CLAIM_DIR)
    assert fd is not None
    os.close(fd)


def test_a_uid_is_never_claimed_twice(tmp_path: Path) -> None:
    """Claims from many threads at once, on many roots: all distinct."""
    got: list[int] = []
    lock = threading.Lock()

    def take(index: int) -> None:
        uid = uids.claim(tmp_path / str(index), tmp_path / "claims")
        with lock:
            got.append(uid)

    threads = [threading.Thread(target=take, args=(i,)) for i in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert len(set(got)) == 20, got
    finally:
        for index in range(20):
            uids.release(tmp_path / str(index))


def test_inotify_instances_of_a_neighbour_do_not_show(tmp_path: Path) -> None:
    """The issue's 50 bit/s: a sender takes every inotify instance its uid may have; the
    receiver (same uid, before) could then make none."""
    sender, receiver = _boxes(tmp_path)
    with sender, receiver:
        _needs_namespaces(receiver)
        idle, busy = _observed(sender, receiver, "inotify", "inotify")
    assert idle == busy, (idle, busy)


def test_a_watch_sees_no_neighbour_reading_a_shared_file(tmp_path: Path) -> None:
    """The issue's 48 bit/s: an inotify watch (or dnotify on the folder) on a file every
    sandbox may read reports the sender's reads of it."""
    sender, receiver = _boxes(tmp_path)
    with sender, receiver:
        _needs_namespaces(receiver)
        idle, busy = _observed(sender, receiver, "read", "watch")
    assert idle == busy == "[]\n", (idle, busy)


def test_the_kernels_file_counters_do_not_show_a_neighbour(tmp_path: Path) -> None:
    """The issue's 40 and 11 bit/s: inodes and open files in use host-wide (a sender makes
    3,000 files in its private /tmp and keeps them open), and every file lock (/proc/locks)
    and aio context of the host; and the host's CPU counters: its forks, running tasks, busy
    time (/proc/stat), its task count (/proc/loadavg: the issue's 4.4 bit/s) and stalls.
    (sysinfo(2) still gives the task count: measured, not closed.)"""
    sender, receiver = _boxes(tmp_path)
    with sender, receiver:
        _needs_namespaces(receiver)
        idle, busy = _observed(sender, receiver, "files", "counters")
    assert idle == busy, (idle, busy)
