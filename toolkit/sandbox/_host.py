"""What this host lets the local backend do, probed once per process, and cgroup handling.

The local backend degrades instead of failing: namespaces need root (and util-linux `unshare`),
cgroups need a writable cgroup-v1 pids/memory hierarchy. Whatever is missing is logged once and
shows up in the sandbox's `not_isolated`, so a run records the isolation it actually had.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class HostSupport:
    """The isolation mechanisms available to the local backend on this host."""

    unshare: str | None
    """Path of util-linux `unshare` when it can make pid+net+mount namespaces here."""
    is_root: bool
    pids_parent: Path | None
    """A cgroup-v1 pids directory we may create children in (None: not writable/absent)."""
    memory_parent: Path | None


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


def _namespaces_work(unshare: str) -> bool:
    try:
        done = subprocess.run(
            [unshare, "--pid", "--fork", "--kill-child", "--mount-proc", "--net", "true"],
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@functools.cache
def probe() -> HostSupport:
    """Probe once: later sandboxes in this process reuse the answer (and the warnings)."""
    is_root = os.geteuid() == 0
    unshare = shutil.which("unshare") or next(
        (p for p in ("/usr/bin/unshare", "/bin/unshare") if os.path.exists(p)), None
    )
    if unshare and not (is_root and _namespaces_work(unshare)):
        unshare = None
    pids = _writable_cgroup_parent("pids", "pids.max") if is_root else None
    memory = _writable_cgroup_parent("memory", "memory.limit_in_bytes") if is_root else None
    support = HostSupport(unshare, is_root, pids, memory)
    if support.unshare is None:
        log.warning(
            "sandbox: no pid/network/mount namespaces on this host (needs root and util-linux "
            "unshare); local sandboxes run with process groups, rlimits and a scrubbed env only"
        )
    if pids is None or memory is None:
        log.warning("sandbox: cgroup-v1 pids/memory not writable here; limits fall back to rlimits")
    return support


class ProcessCgroups:
    """The pids and memory cgroups of one sandboxed process tree, for the limits that are set.

    Only for limits: killing a tree does not need them (PID namespace, or the launcher as
    subreaper), and joining a cgroup-v1 hierarchy costs an RCU grace period per process start
    (about 1-10 ms, more on a busy host).
    """

    def __init__(self, support: HostSupport, memory_bytes: int | None, max_processes: int | None):
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

    def remove(self) -> None:
        for d in self.dirs:
            for _ in range(200):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)
            else:
                log.warning("sandbox: could not remove cgroup %s", d)
        self.dirs = []
