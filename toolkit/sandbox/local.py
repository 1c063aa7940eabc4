"""The local backend: each process tree is a host process, isolated as far as the host allows.

Where the host allows it (root and Linux namespaces; here: yes), every command gets its own
PID namespace (killing its first process kills the whole tree, setsid'd and double-forked
children included), network namespace (loopback only), and mount namespace (hidden paths covered
by an empty tmpfs, read-only paths bind-mounted read-only, private /tmp, /var/tmp, /dev/shm).
It joins per-tree pids and memory cgroups for the limits that are set (where writable), gets
rlimits and a scrubbed environment, and runs as uid/gid `nobody` with no_new_privs. Commands
are started by a fork server (`_launcher.py`), one per sandbox. `isolation` lists what was in
force; where the host cannot, the backend falls back with a logged warning.

What the local backend does NOT isolate (recorded in `not_isolated`):

- the host filesystem outside the hidden paths: it is visible, readable wherever `nobody` may
  read (world-readable files), writable wherever `nobody` may write;
- the same data reached by another path (a hard link, another bind mount, a copy) is not hidden:
  callers hide the real locations;
- the kernel (no seccomp filter), CPU share (no CPU quota; only `cpu_seconds` of CPU time),
  devices in /dev (GPUs stay reachable), the clock, System V IPC and the UTS hostname;
- other sandboxes: their commands also run as `nobody` (they cannot signal or see each other
  across PID namespaces, but each may read, and write, the other's root if it can reach it:
  keep roots under /tmp, which every sandbox sees as its own private tmpfs, or hide them);
- without namespaces (non-root hosts): network, mounts, hidden and read-only paths, and the uid
  (commands run as the caller); trees are still killed whole (the launcher is a subreaper);
- without writable cgroups: the memory cap is per process (RLIMIT_AS), not per tree, and the
  process cap is only RLIMIT_NPROC of the uid (not enforced at all for root).
"""

from __future__ import annotations

import logging
import os
import pwd
import stat
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from toolkit.sandbox import _host
from toolkit.sandbox import gpus as gpu_pinning
from toolkit.sandbox.base import (
    NO_LIMITS,
    ExecResult,
    Limits,
    Sandbox,
    SandboxError,
    SandboxProcess,
)
from toolkit.sandbox.files import read_under, write_under
from toolkit.sandbox.forkserver import ForkServer
from toolkit.sandbox.process import LocalProcess, communicate

log = logging.getLogger(__name__)

PRIVATE_TMP = ("/tmp", "/var/tmp", "/dev/shm")
SETUP_TIMEOUT_S = 60.0
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _sandbox_ids() -> tuple[int, int]:
    try:
        entry = pwd.getpwnam("nobody")
        return entry.pw_uid, entry.pw_gid
    except KeyError:
        return 65534, 65534


def _untraversable_ancestor(path: Path, uid: int) -> Path | None:
    """The highest ancestor of `path` that `uid` (not its owner, not in its group) cannot enter."""
    for ancestor in reversed(path.parents):
        if ancestor == Path("/"):
            continue
        try:
            st = ancestor.stat()
        except OSError:
            return None
        if st.st_uid != uid and not st.st_mode & stat.S_IXOTH:
            return ancestor
    return None


def _is_within(path: Path, other: Path) -> bool:
    return path == other or other in path.parents


class LocalSandbox(Sandbox):
    """Sandbox whose processes run on this host (see the module docstring for what it covers)."""

    name = "local"

    def __init__(
        self,
        root: Path,
        *,
        network: bool = False,
        hide: Sequence[Path] = (),
        limits: Limits = NO_LIMITS,
        env: Mapping[str, str] | None = None,
        readonly: Sequence[Path] = (),
        gpus: Sequence[str] | None = None,
    ):
        self.support = _host.probe()
        # GPU pinning (see gpus.py): the other GPUs' device nodes join the hidden paths.
        self.gpus = None if gpus is None else [str(g) for g in gpus]
        pinned = gpu_pinning.pin(self.gpus) if self.gpus is not None else gpu_pinning.GpuPin()
        hide = [*hide, *pinned.hide]
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise SandboxError(f"sandbox root {self.root} is not a directory; create it first")
        self.network = network
        self.limits = limits
        self.hide = [Path(p).resolve() for p in hide]
        self.readonly = [Path(p).resolve() for p in readonly]
        for hidden in self.hide:
            if _is_within(self.root, hidden):
                raise ValueError(f"sandbox root {self.root} lies inside hidden path {hidden}")
        for path in self.readonly:
            if not path.exists():
                raise ValueError(f"read-only path {path} does not exist")
            for hidden in self.hide:
                if _is_within(path, hidden):
                    raise ValueError(f"read-only path {path} lies inside hidden path {hidden}")
        self.uid, self.gid = _sandbox_ids()
        self.namespaces = self.support.namespaces
        self.userns = self.support.userns
        self.drop_uid = self.namespaces and self.support.is_root
        # Without a user switch, sandboxed code runs as the caller, who can read the caller's
        # home (credentials included): cover it like /tmp, re-exposing only the sandbox's paths.
        home = Path.home().resolve()
        self.private_home = (
            home if self.namespaces and not self.drop_uid and home != Path("/") else None
        )
        self.runtime = self._runtime_paths() if self.namespaces else []
        self.tmpdir = self.root / ".tmp"
        self.tmpdir.mkdir(exist_ok=True)
        if self.drop_uid:
            try:
                self._hand_over(self.root)
            except OSError as e:
                raise SandboxError(
                    f"cannot give {self.root} to the sandbox user {self.uid}: {e.strerror}; "
                    "put the sandbox root on a local filesystem that supports chown"
                ) from e
        self.base_env = {
            "PATH": f"{os.path.dirname(sys.executable)}:{DEFAULT_PATH}",
            "HOME": str(self.root),
            "LANG": "C.UTF-8",
            "TMPDIR": str(self.tmpdir),
            **(env or {}),
            **pinned.env,
        }
        self._server = ForkServer(userns=self.userns)
        self._state = threading.Condition()
        self._starting = 0
        self._processes: list[LocalProcess] = []
        self._closed = False
        self.isolation, self.not_isolated = self._describe()

    # -- description ---------------------------------------------------------------------
    def _describe(self) -> tuple[list[str], list[str]]:
        s, lim = self.support, self.limits
        on = ["pgroup", "subreaper", "scrubbed-env"]
        off = ["host-filesystem-readable", "kernel", "cpu-share", "devices", "ipc", "uts"]
        if self.namespaces:
            on += ["pidns", "mountns", "private-tmp"] + (["userns"] if self.userns else [])
            on += ["private-home"] if self.private_home else []
            on += ["hidden-paths"] if self.hide else []
            on += ["readonly-paths"] if self.readonly else []
            on += [] if self.network else ["netns"]
        else:
            off += ["mounts", "hidden-paths", "readonly-paths", "private-tmp"]
            off += [] if self.network else ["network"]
        if self.network:
            off.append("network")
        if self.gpus is not None and self.namespaces:
            on.append("gpu-pinned")
        elif self.gpus is not None:
            off.append("gpus")  # without mounts only the environment selects the GPUs
        on += ["cgroup-pids"] if s.pids_parent and lim.max_processes is not None else []
        on += ["cgroup-memory"] if s.memory_parent and lim.memory_bytes is not None else []
        if lim.memory_bytes is not None and not s.memory_parent:
            off.append("memory-per-tree")
        if lim.max_processes is not None and not s.pids_parent and not self.drop_uid:
            off.append("process-count")
        if set(self._rlimits()) - {"core"}:
            on.append("rlimits")
        on.append("no-new-privs")
        if self.drop_uid:
            on.append(f"uid:{self._user_name()}")
        else:
            off.append("uid")  # commands run as the caller's own uid on the host
        return sorted(set(on)), sorted(set(off))

    def _user_name(self) -> str:
        try:
            return pwd.getpwuid(self.uid).pw_name
        except KeyError:
            return str(self.uid)

    def _runtime_paths(self) -> list[Path]:
        """The host Python (interpreter, stdlib, venv), read-only, where `nobody` cannot reach it.

        The local backend has no image: sandboxed code runs the host's Python. When that lives
        under a private directory (pyenv in /root, here) or under a directory the sandbox gets
        its own empty copy of (a checkout, and so its .venv, cloned into /tmp), it is bound in
        read-only, alone.
        """
        found: list[Path] = []
        private = [Path(tmp).resolve() for tmp in PRIVATE_TMP]
        private += [self.private_home] if self.private_home else []
        for prefix in sorted({Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve()}):
            hidden = (
                self.drop_uid and _untraversable_ancestor(prefix, self.uid) is not None
            ) or any(_is_within(prefix, d) for d in private)
            if hidden and not any(_is_within(prefix, p) for p in self.readonly):
                found.append(prefix)
        return found

    def _hand_over(self, path: Path) -> None:
        """Give the sandbox user the root's files, so it can work in its own directory."""
        os.chown(path, self.uid, self.gid)
        for dirpath, dirnames, filenames in os.walk(path):
            for name in dirnames + filenames:
                os.lchown(os.path.join(dirpath, name), self.uid, self.gid)

    # -- spawning ------------------------------------------------------------------------
    def _rlimits(self) -> dict[str, int]:
        lim, s = self.limits, self.support
        out = {"core": 0}
        if lim.cpu_seconds is not None:
            out["cpu"] = lim.cpu_seconds
        if lim.file_size_bytes is not None:
            out["fsize"] = lim.file_size_bytes
        if lim.memory_bytes is not None and s.memory_parent is None:
            out["as"] = lim.memory_bytes
        if lim.max_processes is not None and s.pids_parent is None and self.drop_uid:
            out["nproc"] = lim.max_processes
        return out

    def _shadowed(self, expose: list[Path]) -> list[str]:
        shadow = {p for p in PRIVATE_TMP if os.path.isdir(p)}
        if self.private_home is not None and self.private_home.is_dir():
            shadow.add(str(self.private_home))
        if self.drop_uid:
            for path in expose:
                ancestor = _untraversable_ancestor(path, self.uid)
                if ancestor is not None:
                    shadow.add(str(ancestor))
        return sorted(shadow)

    def _spawn(
        self, argv: list[str], cwd: str | None, env: dict[str, str] | None, streams: list[bool]
    ) -> LocalProcess:
        """Launch `argv`; `streams` says which of stdin/stdout/stderr become host pipes."""
        if not argv:
            raise ValueError("argv must name a command")
        workdir = Path(cwd) if cwd is not None else self.root
        if not workdir.is_absolute():
            workdir = self.root / workdir
        readonly = [*self.readonly, *self.runtime]
        expose = sorted([self.root, *readonly], key=lambda p: len(str(p)))
        spec = {
            "mounts": self.namespaces,
            "pidns": self.namespaces,
            "userns": self.userns,
            "network": self.network,
            "expose": [str(p) for p in expose],
            "readonly": [str(p) for p in readonly],
            "shadow": self._shadowed(expose) if self.namespaces else [],
            "hide": [str(p) for p in self.hide],
            # Private /tmp and friends: capped by the memory limit (their pages count in the
            # memory cgroup too), else a quarter of the RAM each.
            "tmpfs_size": str(self.limits.memory_bytes or "25%"),
            "loopback": self.namespaces and not self.network,
            "rlimits": self._rlimits(),
            "uid": self.uid if self.drop_uid else None,
            "gid": self.gid if self.drop_uid else None,
            "cwd": str(workdir),
            "argv": argv,
            "env": {**self.base_env, **(env or {})},
        }
        with self._state:
            if self._closed:
                raise SandboxError("sandbox was cleaned up; create a new one")
            self._starting += 1
        try:
            process = self._launch(spec, streams)
        finally:
            with self._state:
                self._starting -= 1
                self._state.notify_all()
        return process

    def _launch(self, spec: dict[str, object], streams: list[bool]) -> LocalProcess:
        cgroups = _host.ProcessCgroups(
            self.support, self.limits.memory_bytes, self.limits.max_processes
        )
        spec["cgroups"] = cgroups.procs_files
        theirs: list[int] = []
        ours: list[IO[bytes] | None] = []
        for index, wanted in enumerate(streams):
            if not wanted:
                theirs.append(os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC))
                ours.append(None)
                continue
            read_end, write_end = os.pipe2(os.O_CLOEXEC)
            theirs.append(read_end if index == 0 else write_end)
            host_end = write_end if index == 0 else read_end
            ours.append(os.fdopen(host_end, "wb" if index == 0 else "rb"))
        status_r, status_w = os.pipe2(os.O_CLOEXEC)
        process = LocalProcess(cgroups, status_r, *ours)
        try:
            pid, pidfd = self._server.launch(spec, [*theirs, status_w])
        except BaseException:
            for stream in ours:
                if stream is not None:
                    stream.close()
            os.close(status_r)
            cgroups.remove()
            raise
        finally:
            for fd in [*theirs, status_w]:
                os.close(fd)
        process.adopt(pid, pidfd)
        with self._state:  # forget trees that are over (a run starts thousands); keep the rest
            self._processes = [p for p in self._processes if not p.settled] + [process]
        process.await_setup(SETUP_TIMEOUT_S)
        return process

    # -- interface -----------------------------------------------------------------------
    def exec(
        self,
        argv: list[str],
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        input: bytes | None = None,
        timeout: float | None = None,
    ) -> ExecResult:
        started = time.monotonic()
        process = self._spawn(argv, cwd, env, [input is not None, True, True])
        out, err, timed_out = communicate(process, input, timeout)
        code = process.wait()
        assert code is not None
        return ExecResult(code, out, err, timed_out, time.monotonic() - started)

    def start(
        self,
        argv: list[str],
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        stdin: bool = True,
        stdout: bool = True,
        stderr: bool = True,
    ) -> SandboxProcess:
        return self._spawn(argv, cwd, env, [stdin, stdout, stderr])

    def read_file(self, path: str) -> bytes:
        return read_under(self.root, path)

    def write_file(self, path: str, data: bytes) -> None:
        owner = (self.uid, self.gid) if self.drop_uid else None
        write_under(self.root, path, data, owner)

    def cleanup(self) -> None:
        errors: list[str] = []
        with self._state:  # commands being started finish starting first, then die with the rest
            self._closed = True
            self._state.wait_for(lambda: self._starting == 0, timeout=SETUP_TIMEOUT_S * 2)
            processes, self._processes = self._processes, []
        for process in processes:
            try:
                process.release()
            except SandboxError as e:
                errors.append(str(e))
        self._server.close()
        if errors:
            raise SandboxError("; ".join(errors))
