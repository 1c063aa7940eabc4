"""What this host lets the local backend do, probed once per process, and cgroup handling.

The local backend degrades instead of failing: namespaces need root or unprivileged user
namespaces, cgroups need root and a writable cgroup-v1 pids/memory hierarchy (cgroup v2 is not
used yet). Whatever is missing is logged once and shows up in the sandbox's `not_isolated`, so
a run records the isolation it actually had.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class HostSupport:
    """The isolation mechanisms available to the local backend on this host."""

    namespaces: bool
    """New mount, PID, network, IPC and UTS namespaces can be made here."""
    userns: bool
    """They need a user namespace first (an unprivileged user: mounts are then locked)."""
    is_root: bool
    pids_parent: Path | None
    """A cgroup-v1 pids directory we may create children in (None: not writable/absent)."""
    memory_parent: Path | None
    cpu_parent: Path | None = None
    """A cgroup-v1 cpu directory we may create children in, for a CPU quota."""
    mount_setattr: bool = False
    """The whole host can be made read-only in one call (Linux 5.12+); else, with namespaces,
    each mount is remounted read-only in turn."""
    keyring_filter: bool = False
    """A seccomp filter can take the kernel keyrings away (`_seccomp.py`)."""
    overlay: bool = False
    """An overlay filesystem can be mounted in the namespaces, its writable layer on a tmpfs
    (what an ephemeral root is made of)."""


def _own_cgroup_dir(controller: str) -> Path | None:
    """This process's cgroup-v1 directory for `controller`, if that hierarchy is mounted."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            directory = CGROUP_ROOT / controller / path.lstrip("/")
            return directory if directory.is_dir() else None
    return None


def _writable_cgroup_parent(controller: str, limit_file: str) -> Path | None:
    parent = _own_cgroup_dir(controller)
    if parent is None:
        return None
    probe = parent / f"ari-probe-{uuid.uuid4().hex[:8]}"
    try:
        probe.mkdir()
    except OSError:
        return None
    try:
        return parent if (probe / limit_file).exists() else None
    finally:
        try:
            probe.rmdir()
        except OSError:
            log.warning("could not remove probe cgroup %s", probe)


OVERLAY_USERNS = ",userxattr"
"""Overlay option inside a user namespace: its bookkeeping goes to user.* extended attributes
(trusted.* ones need real root)."""
CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
# Exit 1: no namespaces; else 16 + 1 (mount_setattr works in them) + 2 (an overlay with its
# upper layer on a tmpfs can be mounted in them, as an ephemeral root needs).
_PROBE = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
uid, gid = os.getuid(), os.getgid()
if libc.unshare(int(sys.argv[1])) != 0:
    sys.exit(1)
if sys.argv[2]:  # a user namespace: be its root, as the launcher is
    for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
        with open("/proc/self/" + name, "w") as f:
            f.write(text)
if libc.mount(None, b"/", None, ctypes.c_ulong(0x4000 | 1 << 18), None) != 0:
    sys.exit(1)
found = 16
attr = (ctypes.c_uint64 * 4)(1, 0, 0, 0)  # MOUNT_ATTR_RDONLY, AT_EMPTY_PATH | AT_RECURSIVE
fd = os.open("/", os.O_PATH)
args = (ctypes.c_long(fd), ctypes.c_char_p(b""), ctypes.c_long(0x9000), ctypes.byref(attr))
found += libc.syscall(ctypes.c_long(442), *args, ctypes.c_size_t(32)) == 0
try:
    if libc.mount(b"tmpfs", b"/tmp", b"tmpfs", 0, b"size=1m") == 0:
        for name in ("lower", "upper", "work", "merged"):
            os.mkdir("/tmp/" + name)
        options = "lowerdir=/tmp/lower,upperdir=/tmp/upper,workdir=/tmp/work" + sys.argv[2]
        if libc.mount(b"overlay", b"/tmp/merged", b"overlay", 0, options.encode()) == 0:
            os.close(os.open("/tmp/merged/written", os.O_CREAT | os.O_WRONLY))
            found += 2
except OSError:
    pass
sys.exit(found)
"""
_SECCOMP = Path(__file__).with_name("_seccomp.py")


def _run_probe(argv: list[str]) -> int:
    """Exit status of a probe in a fresh process (never this one: it may have threads, and
    would change); -1 if it could not run."""
    try:
        return subprocess.run(
            [sys.executable, "-I", "-S", *argv], capture_output=True, timeout=60
        ).returncode
    except (OSError, subprocess.TimeoutExpired):
        return -1


@functools.cache
def probe() -> HostSupport:
    """Probe once: later sandboxes in this process reuse the answer (and the warnings)."""
    is_root = os.geteuid() == 0
    flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS
    flags |= 0 if is_root else CLONE_NEWUSER
    unshared = _run_probe(["-c", _PROBE, str(flags), OVERLAY_USERNS if not is_root else ""])
    namespaces = unshared >= 16
    userns = namespaces and not is_root
    pids = _writable_cgroup_parent("pids", "pids.max") if is_root else None
    memory = _writable_cgroup_parent("memory", "memory.limit_in_bytes") if is_root else None
    cpu = _writable_cgroup_parent("cpu", "cpu.cfs_quota_us") if is_root else None
    keyrings = _run_probe([str(_SECCOMP)]) == 0
    support = HostSupport(
        namespaces,
        userns,
        is_root,
        pids,
        memory,
        cpu_parent=cpu,
        mount_setattr=namespaces and bool(unshared & 1),
        keyring_filter=keyrings,
        overlay=namespaces and bool(unshared & 2),
    )
    if not support.namespaces:
        log.warning(
            "sandbox: this host allows no mount/PID/network/IPC namespaces (neither as root "
            "nor through a user namespace): local sandboxes have no network, hidden-path or "
            "read-only isolation, only process groups, rlimits and a scrubbed environment"
        )
    if not keyrings:
        log.warning("sandbox: no seccomp filter here: kernel keyrings stay reachable")
    elif userns:
        log.warning(
            "sandbox: not root: local sandboxes use a user namespace and run as your own uid "
            "(no uid switch, no cgroup limits)"
        )
    if is_root and (pids is None or memory is None):
        log.warning("sandbox: cgroup-v1 pids/memory not writable here; limits fall back to rlimits")
    return support


CFS_PERIOD_US = 100_000
"""The scheduler period a CPU quota is counted in (the kernel's default, as Docker uses)."""


def cfs_quota_us(cpus: float) -> int:
    """CPU time per period for a cap of `cpus` cores (the kernel's floor is 1 ms)."""
    return max(1000, round(cpus * CFS_PERIOD_US))


class ProcessCgroups:
    """The pids, memory and cpu cgroups of one sandboxed process tree, for the limits set.

    Only for limits: killing a tree does not need them (PID namespace, or the launcher as
    subreaper), and joining a cgroup-v1 hierarchy costs an RCU grace period per process start
    (about 1-10 ms, more on a busy host).
    """

    def __init__(
        self,
        support: HostSupport,
        memory_bytes: int | None,
        max_processes: int | None,
        cpus: float | None = None,
    ):
        name = f"ari-sandbox-{uuid.uuid4().hex[:12]}"
        self.dirs: list[Path] = []
        if support.pids_parent is not None and max_processes is not None:
            pids = support.pids_parent / name
            pids.mkdir()
            self.dirs.append(pids)
            (pids / "pids.max").write_text(str(max_processes))
        if support.memory_parent is not None and memory_bytes is not None:
            memory = support.memory_parent / name
            memory.mkdir()
            self.dirs.append(memory)
            (memory / "memory.limit_in_bytes").write_text(str(memory_bytes))
            memsw = memory / "memory.memsw.limit_in_bytes"
            if memsw.exists():  # no swapping past the cap either
                memsw.write_text(str(memory_bytes))
        if support.cpu_parent is not None and cpus is not None:
            cpu = support.cpu_parent / name
            cpu.mkdir()
            self.dirs.append(cpu)
            (cpu / "cpu.cfs_period_us").write_text(str(CFS_PERIOD_US))
            (cpu / "cpu.cfs_quota_us").write_text(str(cfs_quota_us(cpus)))

    @property
    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs]

    def pids(self) -> set[int]:
        found: set[int] = set()
        for d in self.dirs:
            with contextlib.suppress(OSError):
                found.update(int(x) for x in (d / "cgroup.procs").read_text().split())
        return found

    def kill_all(self, deadline_s: float = 10.0) -> bool:
        """SIGKILL every member until none is left (new forks are caught by the next pass)."""
        end = time.monotonic() + deadline_s
        while True:
            members = self.pids()
            if not members:
                return True
            if time.monotonic() > end:
                return False
            for pid in members:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.005)

    def remove(self, wait: bool = True) -> None:
        """Remove the (empty) cgroups; without `wait`, leave busy ones for a later call."""
        left: list[Path] = []
        for d in self.dirs:
            for _ in range(200 if wait else 1):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if wait:
                        time.sleep(0.01)
            else:
                left.append(d)
                if wait:
                    log.warning("sandbox: could not remove cgroup %s", d)
        self.dirs = [] if wait else left
