"""What this host lets the local backend do, probed once per process, and cgroup handling.

The local backend degrades instead of failing: namespaces need root or unprivileged user
namespaces; cgroups need either root and writable cgroup-v1 pids/memory/cpu hierarchies, or a
cgroup-v2 tree with a place for them (a delegated subtree, or as root one of the toolkit's own).
Whatever is missing is logged once and shows up in the sandbox's `not_isolated`, so a run
records the isolation it actually had.

On a cgroup-v2 host the trees' cgroups go where `cgroups.find_layout` says: this process's
own cgroup where it is delegated to us, else a cgroup of the toolkit's own at the top of the
tree (`/sys/fs/cgroup/ari-bench` as root), else only the controllers there are; the layouts and
every cgroup file they write are listed in `cgroups.py`.
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

from toolkit.sandbox.base import teardown_wait_s
from toolkit.sandbox.local.cgroups import (
    CGROUP_ROOT,
    SELF_CGROUP,
    V1_CONTROLLERS,
    CgroupLayout,
    drop_top,
    ensure_top,
    find_layout,
    is_cgroup2,
)

log = logging.getLogger(__name__)


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
    """A seccomp filter can take the kernel keyrings away (`seccomp.py`)."""
    overlay: bool = False
    """An overlay filesystem can be mounted in the namespaces, its writable layer on a tmpfs
    (what an ephemeral root is made of)."""
    cgroup2: bool = False
    """The cgroup parents are one cgroup-v2 directory (`<own>/ari-sandboxes`, or the toolkit's
    own `ari-bench` at the top of the tree), not v1 hierarchies: one cgroup per tree holds
    every limit, and kills it whole (`cgroup.kill`)."""
    cgroups: CgroupLayout | None = None
    """Which cgroup layout the parents come from, and why (None: not probed, a test's own)."""

    @property
    def cgroup_top(self) -> Path | None:
        """The toolkit's own top-level cgroup, when the trees' cgroups go there (layout `top`:
        made again for a tree if gone, removed when it holds none)."""
        layout, parent = self.cgroups, self.memory_parent or self.pids_parent or self.cpu_parent
        if layout is None or layout.kind != "top" or parent is None:
            return None
        return parent if parent == (layout.memory or layout.pids or layout.cpu) else None


def _own_cgroup_dir(controller: str, root: Path = CGROUP_ROOT) -> Path | None:
    """This process's cgroup-v1 directory for `controller`, if that hierarchy is mounted."""
    try:
        lines = SELF_CGROUP.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            directory = root / controller / path.lstrip("/")
            return directory if directory.is_dir() else None
    return None


def _writable_cgroup_parent(
    controller: str, limit_file: str, root: Path = CGROUP_ROOT
) -> Path | None:
    parent = _own_cgroup_dir(controller, root)
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
_SECCOMP = Path(__file__).with_name("seccomp.py")


def _run_probe(argv: list[str]) -> int:
    """Exit status of a probe in a fresh process (never this one: it may have threads, and
    would change); -1 if it could not run."""
    try:
        return subprocess.run(
            [sys.executable, "-I", "-S", *argv], capture_output=True, timeout=60
        ).returncode
    except (OSError, subprocess.TimeoutExpired):
        return -1


def probe_cgroups(
    is_root: bool, root: Path = CGROUP_ROOT, self_cgroup: Path = SELF_CGROUP
) -> CgroupLayout:
    """Where trees' cgroups go: a v2 layout where the host is pure v2 (`cgroups.find_layout`),
    else the v1 hierarchies this process may write (root only)."""
    if is_cgroup2(root):
        return find_layout(root, self_cgroup, is_root=is_root)
    if not (root / "cgroup.controllers").is_file() and not any(
        (root / c).is_dir() for c in V1_CONTROLLERS
    ):
        return CgroupLayout("none", f"no cgroup hierarchy mounted at {root}")
    if not is_root:
        return CgroupLayout("none", "cgroup v1 needs root to make cgroups")
    pids = _writable_cgroup_parent("pids", "pids.max", root)
    memory = _writable_cgroup_parent("memory", "memory.limit_in_bytes", root)
    cpu = _writable_cgroup_parent("cpu", "cpu.cfs_quota_us", root)
    if pids is None and memory is None and cpu is None:
        return CgroupLayout("none", "no writable cgroup-v1 pids, memory or cpu hierarchy")
    lacking = [c for c, p in (("pids", pids), ("memory", memory), ("cpu", cpu)) if p is None]
    why = f"no writable v1 {' '.join(lacking)} hierarchy" if lacking else ""
    return CgroupLayout("v1", why, pids, memory, cpu)


@functools.cache
def probe() -> HostSupport:
    """Probe once: later sandboxes in this process reuse the answer (and the warnings)."""
    is_root = os.geteuid() == 0
    flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS
    flags |= 0 if is_root else CLONE_NEWUSER
    unshared = _run_probe(["-c", _PROBE, str(flags), OVERLAY_USERNS if not is_root else ""])
    namespaces = unshared >= 16
    userns = namespaces and not is_root
    layout = probe_cgroups(is_root)
    pids, memory, cpu = layout.pids, layout.memory, layout.cpu
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
        cgroup2=layout.cgroup2,
        cgroups=layout,
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
            "(no uid switch; cgroup limits only in a delegated cgroup-v2 subtree)"
        )
    if layout.cgroup2 and layout.kind != "delegated":
        log.info("sandbox: cgroups: %s", layout.describe())
    if is_cgroup2() and (pids is None or memory is None):
        log.warning(
            "sandbox: cgroup v2 here, but no cgroup with memory and pids to use (%s); limits "
            "fall back to rlimits, and no address-space rlimit is set where CUDA may run "
            "(`toolkit doctor` says what would fix it)",
            layout.why,
        )
    elif is_root and (pids is None or memory is None):
        log.warning("sandbox: cgroup-v1 pids/memory not writable here; limits fall back to rlimits")
    return support


TOP_TRIES = 5
"""Attempts at making a tree's cgroup in the toolkit's top cgroup while concurrent toolkits
remove it (each removes it when it is empty)."""
CFS_PERIOD_US = 100_000
"""The scheduler period a CPU quota is counted in (the kernel's default, as Docker uses)."""


def cfs_quota_us(cpus: float) -> int:
    """CPU time per period for a cap of `cpus` cores (the kernel's floor is 1 ms)."""
    return max(1000, round(cpus * CFS_PERIOD_US))


class ProcessCgroups:
    """The cgroups of one sandboxed process tree, for the limits set: one cgroup-v2 directory,
    or a cgroup-v1 directory per controller (pids, memory, cpu).

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
        self.cgroup2 = support.cgroup2
        self._top: Path | None = None
        self._wanted: tuple[str, ...] = ()
        if support.cgroup2:
            self._make_v2(support, name, memory_bytes, max_processes, cpus)
            return
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

    def _make_v2(
        self,
        support: HostSupport,
        name: str,
        memory_bytes: int | None,
        max_processes: int | None,
        cpus: float | None,
    ) -> None:
        """One v2 cgroup with every limit that is set and that the parent offers."""
        files: dict[str, str] = {}
        if support.memory_parent is not None and memory_bytes is not None:
            files["memory.max"] = str(memory_bytes)
            files["memory.swap.max"] = "0"  # no swapping past the cap either
        if support.pids_parent is not None and max_processes is not None:
            files["pids.max"] = str(max_processes)
        if support.cpu_parent is not None and cpus is not None:
            files["cpu.max"] = f"{cfs_quota_us(cpus)} {CFS_PERIOD_US}"
        parent = support.memory_parent or support.pids_parent or support.cpu_parent
        if not files or parent is None:
            return
        directory = parent / name
        self._top = support.cgroup_top
        self._wanted = support.cgroups.wanted if support.cgroups else ()
        try:
            self._make_dir(directory)
        except OSError:
            if self._top is not None:
                drop_top(self._top)  # nothing of a failed start is left
            raise
        self.dirs.append(directory)
        # A real cgroup comes with its interface files; one without memory.swap.max has no
        # swap accounting (no swap to cap).
        made = (directory / "cgroup.procs").exists()
        try:
            for file, value in files.items():
                if made and not (directory / file).exists() and file == "memory.swap.max":
                    continue
                (directory / file).write_text(value)
        except OSError:
            self.remove()
            raise

    def _make_dir(self, directory: Path) -> None:
        """mkdir a tree's v2 cgroup; in the toolkit's own top cgroup, make that first if a
        concurrent toolkit removed it (it goes when empty), and check the controllers came
        with it (it may have been made again between our write and our mkdir)."""
        if self._top is None:
            directory.mkdir()
            return
        for attempt in range(TOP_TRIES):
            ensure_top(self._top, self._wanted)
            try:
                directory.mkdir()
            except FileNotFoundError:
                if attempt == TOP_TRIES - 1:
                    raise
                continue
            controllers = directory / "cgroup.controllers"
            if not controllers.exists() or set(self._wanted) <= set(
                controllers.read_text().split()
            ):
                return
            directory.rmdir()
        raise OSError(f"{directory}: made without {' '.join(self._wanted)} {TOP_TRIES} times")

    @property
    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs]

    def pids(self) -> set[int]:
        found: set[int] = set()
        for d in self.dirs:
            with contextlib.suppress(OSError):
                found.update(int(x) for x in (d / "cgroup.procs").read_text().split())
        found.discard(0)  # outside our pid namespace, or not a pid: never kill(0)
        return found

    def kill(self) -> None:
        """Kill every member at once, new forks included (cgroup v2 on Linux 5.14+; elsewhere
        a no-op: `kill_all` signals the members one by one)."""
        for d in self.dirs if self.cgroup2 else []:
            with contextlib.suppress(OSError):
                (d / "cgroup.kill").write_text("1")

    def _populated(self) -> bool:
        """Whether a v2 cgroup still holds a process, in it or below (`cgroup.events`)."""
        return any(self._populated_dir(d) for d in self.dirs)

    def kill_all(self, deadline_s: float = 10.0) -> bool:
        """Kill every member until none is left (new forks are caught by the next pass):
        `cgroup.kill` where there is one, else SIGKILL to each; on v2, until the cgroup says
        it is no longer populated."""
        end = time.monotonic() + deadline_s
        while True:
            members = self.pids()
            if not members and not (self.cgroup2 and self._populated()):
                return True
            if time.monotonic() > end:
                return False
            self.kill()
            for pid in members:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.005)

    def remove(self, wait: bool = True) -> None:
        """Remove the (empty) cgroups; without `wait`, leave busy ones for a later call.

        A v2 cgroup is removed once `cgroup.events` says `populated 0`, waited for up to the
        teardown bound (`teardown_wait_s`)."""
        left: list[Path] = []
        end = time.monotonic() + (teardown_wait_s() if wait else 0.0)
        for d in self.dirs:
            while self.cgroup2 and self._populated_dir(d) and time.monotonic() < end:
                time.sleep(0.01)
            for _ in range(200 if wait else 1):
                if self.cgroup2 and self._populated_dir(d):
                    break  # the kernel refuses (EBUSY) while it holds a process
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if wait:
                        time.sleep(0.01)
            if d.exists():
                left.append(d)
                if wait:
                    log.warning("sandbox: could not remove cgroup %s", d)
        self.dirs = [] if wait else left
        if self._top is not None and not self.dirs:
            drop_top(self._top)  # refused while another tree's cgroup is in it
            self._top = None

    @staticmethod
    def _populated_dir(d: Path) -> bool:
        """Whether the v2 cgroup `d` holds a process (gone, or v1 without the file: no)."""
        try:
            return "populated 0" not in (d / "cgroup.events").read_text().split("\n")
        except FileNotFoundError:
            return False
        except OSError:
            return True
