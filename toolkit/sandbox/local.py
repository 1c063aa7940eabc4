"""The local backend: each process tree is a host process, isolated as far as the host allows.

Where the host allows it (root, util-linux `unshare`, here: yes), every command gets its own
PID namespace (killing its first process kills the whole tree, setsid'd and double-forked
children included), network namespace (loopback only), and mount namespace (hidden paths covered
by an empty tmpfs, read-only paths bind-mounted read-only, private /tmp, /var/tmp and /dev/shm);
it joins per-tree pids and memory cgroups (when writable), gets rlimits, a scrubbed environment,
and runs as uid/gid `nobody` with no_new_privs. `isolation` lists what was in force.

What the local backend does NOT isolate (recorded in `not_isolated`):

- the host filesystem outside the hidden paths: it is visible, readable wherever `nobody` may
  read (world-readable files), writable wherever `nobody` may write;
- the same data reached by another path (a hard link, another bind mount, a copy) is not hidden:
  callers hide the real locations;
- the kernel (no seccomp filter), CPU share (no CPU quota; only `cpu_seconds` of CPU time),
  devices in /dev (GPUs stay reachable), the clock, System V IPC and the UTS hostname;
- processes of other sandboxes that also run as `nobody` share its uid (they cannot signal
  across PID namespaces, but they can read each other's world-readable files);
- without namespaces (non-root hosts): network, mounts and escaped (setsid + double-forked)
  processes; without writable cgroups: the memory cap is per process (RLIMIT_AS), not per tree,
  and the process cap is only RLIMIT_NPROC of the uid.
"""

from __future__ import annotations

import contextlib
import logging
import marshal
import os
import pwd
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

from toolkit.sandbox import _host
from toolkit.sandbox.base import (
    NO_LIMITS,
    ExecResult,
    Limits,
    Sandbox,
    SandboxError,
    SandboxProcess,
)
from toolkit.sandbox.files import read_under, write_under

log = logging.getLogger(__name__)

INIT_SCRIPT = Path(__file__).with_name("_init.py")
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


def _descendants(pid: int) -> list[int]:
    """Host pids descending from `pid` (a snapshot from /proc; used where no pidns exists)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != b"Z":  # zombies are dead already; their parent reaps them
            children.setdefault(int(fields[1]), []).append(int(entry))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _signal(send: Callable[[int, int], None], target: int) -> None:
    """SIGKILL `target` (a pid or process group) if it still exists."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        send(target, signal.SIGKILL)


class LocalProcess(SandboxProcess):
    """A process tree started by `LocalSandbox`; `kill` takes down everything it started.

    Its launcher reports on a status pipe: "ok" once the command is about to be exec'd (or an
    `ari-sandbox:` line saying why set-up failed), then "exit N" with the command's own status.
    """

    def __init__(
        self, popen: subprocess.Popen[bytes], cgroups: _host.ProcessCgroups, status_fd: int
    ):
        self._popen = popen
        self._cgroups = cgroups
        self._status_fd: int | None = status_fd
        self._status = b""
        self._code: int | None = None
        self._released = False
        self._killed = False
        self.pid = popen.pid
        self.stdin: IO[bytes] | None = popen.stdin
        self.stdout: IO[bytes] | None = popen.stdout
        self.stderr: IO[bytes] | None = popen.stderr

    def _read_status(self, timeout: float) -> bool:
        """Read what the launcher said within `timeout`; False once the pipe is at EOF."""
        if self._status_fd is None:
            return False
        ready, _, _ = select.select([self._status_fd], [], [], timeout)
        if not ready:
            return True
        chunk = os.read(self._status_fd, 4096)
        self._status += chunk
        if not chunk:
            os.close(self._status_fd)
            self._status_fd = None
        return bool(chunk)

    def await_setup(self, timeout: float) -> None:
        """Block until the command is exec'd; SandboxError (tree killed) if set-up failed."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self._status.startswith(b"ok\n"):
                return
            if self._status.endswith(b"\n") or not self._read_status(0.05):
                break
        if self._status.startswith(b"ok\n"):
            return
        self.kill()
        reason = self._status.decode(errors="replace").strip() or "the launcher died in set-up"
        raise SandboxError(f"local sandbox set-up failed: {reason}")

    def _finish(self) -> int:
        """The command's exit status, once the launcher has exited; releases the tree."""
        if self._code is None:
            while self._read_status(2.0):
                pass
            # Killed by us before it reported: SIGKILL, whatever its launcher exited with.
            self._code = -signal.SIGKILL if self._killed else self._popen.returncode
            for line in self._status.splitlines():
                if line.startswith(b"exit "):
                    self._code = int(line[5:])
        if not self._released:
            self._kill_tree()  # nothing of the tree may outlive its first process
        assert self._code is not None
        return self._code

    def wait(self, timeout: float | None = None) -> int | None:
        try:
            self._popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        return self._finish()

    def poll(self) -> int | None:
        if self._popen.poll() is None:
            return None
        return self._finish()

    def kill(self) -> None:
        if not self._released:
            self._kill_tree()
        self._finish()

    def _kill_tree(self) -> None:
        # The first process leads its own process group; in a PID namespace its death also
        # kills the namespace. The /proc walk and the cgroup catch what escaped the group.
        # Only while the first process is unreaped is its pid certainly still ours to walk.
        # The launcher is a subreaper, so escaped orphans stay its descendants; kill them
        # (repeatedly: they may be forking) before the launcher, whose death would free them.
        if self._popen.returncode is None:
            self._killed = True
        for _ in range(1000):
            if self._popen.returncode is not None:
                break
            doomed = _descendants(self.pid)
            if not doomed:
                break
            for pid in doomed:
                _signal(os.kill, pid)
        _signal(os.killpg, self.pid)
        try:
            self._popen.wait(5)
        except subprocess.TimeoutExpired as e:
            raise SandboxError(f"sandboxed process {self.pid} survived SIGKILL") from e
        if not self._cgroups.kill_all():
            raise SandboxError(f"processes of sandboxed tree {self.pid} survived SIGKILL")
        self._cgroups.remove()
        self._released = True


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
    ):
        self.support = _host.probe()
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
        self.uid, self.gid = _sandbox_ids()
        self.namespaces = self.support.unshare is not None
        self.drop_uid = self.namespaces and self.support.is_root
        self.runtime = self._runtime_paths() if self.drop_uid else []
        self.tmpdir = self.root / ".tmp"
        self.tmpdir.mkdir(exist_ok=True)
        if self.drop_uid:
            self._hand_over(self.root)
        self.base_env = {
            "PATH": f"{os.path.dirname(sys.executable)}:{DEFAULT_PATH}",
            "HOME": str(self.root),
            "LANG": "C.UTF-8",
            "TMPDIR": str(self.tmpdir),
            **(env or {}),
        }
        self._state = Path(tempfile.mkdtemp(prefix="ari-sandbox-"))
        self._processes: list[LocalProcess] = []
        self._closed = False
        self.isolation, self.not_isolated = self._describe()

    # -- description ---------------------------------------------------------------------
    def _describe(self) -> tuple[list[str], list[str]]:
        s, lim = self.support, self.limits
        on = ["pgroup", "subreaper", "scrubbed-env"]
        off = ["host-filesystem-readable", "kernel", "cpu-share", "devices", "ipc", "uts"]
        if self.namespaces:
            on += ["pidns", "mountns", "private-tmp"]
            on += ["hidden-paths"] if self.hide else []
            on += ["readonly-paths"] if self.readonly else []
            on += [] if self.network else ["netns"]
        else:
            off += ["mounts", "hidden-paths", "readonly-paths", "private-tmp"]
            off += [] if self.network else ["network"]
        if self.network:
            off.append("network")
        on += ["cgroup-pids"] if s.pids_parent else []
        on += ["cgroup-memory"] if s.memory_parent else []
        if lim.memory_bytes is not None and not s.memory_parent:
            off.append("memory-per-tree")
        if lim.max_processes is not None and not s.pids_parent and not self.drop_uid:
            off.append("process-count")
        if any(v is not None for v in (lim.cpu_seconds, lim.file_size_bytes)) or (
            lim.memory_bytes is not None and not s.memory_parent
        ):
            on.append("rlimits")
        if self.drop_uid:
            on += [f"uid:{pwd.getpwuid(self.uid).pw_name if self._has_user() else self.uid}"]
            on.append("no-new-privs")
        else:
            on.append("no-new-privs")
            off.append("uid")
        return sorted(set(on)), sorted(set(off))

    def _has_user(self) -> bool:
        try:
            pwd.getpwuid(self.uid)
            return True
        except KeyError:
            return False

    def _runtime_paths(self) -> list[Path]:
        """The host Python (interpreter, stdlib, venv), read-only, where `nobody` cannot reach it.

        The local backend has no image: sandboxed code runs the host's Python. When that lives
        under a private directory (pyenv in /root, here), it is bound in read-only, alone.
        """
        found: list[Path] = []
        for prefix in {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve()}:
            if _untraversable_ancestor(prefix, self.uid) is not None and not any(
                _is_within(prefix, p) for p in self.readonly
            ):
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
        if self.drop_uid:
            for path in expose:
                ancestor = _untraversable_ancestor(path, self.uid)
                if ancestor is not None:
                    shadow.add(str(ancestor))
        return sorted(shadow)

    def _spawn(
        self,
        argv: list[str],
        cwd: str | None,
        env: dict[str, str] | None,
        stdin: int,
        stdout: int,
        stderr: int,
    ) -> LocalProcess:
        if self._closed:
            raise SandboxError("sandbox was cleaned up; create a new one")
        if not argv:
            raise ValueError("argv must name a command")
        workdir = Path(cwd) if cwd is not None else self.root
        if not workdir.is_absolute():
            workdir = self.root / workdir
        readonly = [*self.readonly, *self.runtime]
        expose = sorted([self.root, *readonly], key=lambda p: len(str(p)))
        cgroups = _host.ProcessCgroups(
            self.support, self.limits.memory_bytes, self.limits.max_processes
        )
        status_r, status_w = os.pipe()
        spec = {
            "cgroups": cgroups.procs_files,
            "mounts": self.namespaces,
            "pidns": self.namespaces,
            "expose": [str(p) for p in expose],
            "readonly": [str(p) for p in readonly],
            "shadow": self._shadowed(expose) if self.namespaces else [],
            "hide": [str(p) for p in self.hide],
            "tmpfs_size": "50%",
            "loopback": self.namespaces and not self.network,
            "rlimits": self._rlimits(),
            "uid": self.uid if self.drop_uid else None,
            "gid": self.gid if self.drop_uid else None,
            "cwd": str(workdir),
            "argv": argv,
            "env": {**self.base_env, **(env or {})},
            "status_fd": status_w,
        }
        spec_file = self._state / f"spec-{os.getpid()}-{time.monotonic_ns()}"
        spec_file.write_bytes(marshal.dumps(spec))
        command = [sys.executable, "-I", "-S", str(INIT_SCRIPT), str(spec_file)]
        if self.namespaces:
            assert self.support.unshare is not None
            ns = ["--pid", "--fork", "--kill-child", "--mount-proc"]
            ns += [] if self.network else ["--net"]
            command = [self.support.unshare, *ns, "--", *command]
        try:
            popen = subprocess.Popen(
                command,
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                start_new_session=True,
                close_fds=True,
                pass_fds=(status_w,),
                env={"PATH": DEFAULT_PATH, "LANG": "C.UTF-8"},
            )
        except OSError as e:
            cgroups.remove()
            raise SandboxError(f"could not start the sandbox launcher: {e}") from e
        finally:
            os.close(status_w)
        process = LocalProcess(popen, cgroups, status_r)
        self._processes.append(process)
        try:
            process.await_setup(SETUP_TIMEOUT_S)
        finally:
            spec_file.unlink(missing_ok=True)
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
        stdin = subprocess.PIPE if input is not None else subprocess.DEVNULL
        process = self._spawn(argv, cwd, env, stdin, subprocess.PIPE, subprocess.PIPE)
        popen = process._popen
        timed_out = False
        try:
            out, err = popen.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            process.kill()
            try:
                out, err = popen.communicate(timeout=5)
            except subprocess.TimeoutExpired:  # an escaped process still holds the pipes
                out, err = b"", b""
        popen.wait()
        code = process._finish()
        return ExecResult(code, out or b"", err or b"", timed_out, time.monotonic() - started)

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
        def pipe(wanted: bool) -> int:
            return subprocess.PIPE if wanted else subprocess.DEVNULL

        return self._spawn(argv, cwd, env, pipe(stdin), pipe(stdout), pipe(stderr))

    def read_file(self, path: str) -> bytes:
        return read_under(self.root, path)

    def write_file(self, path: str, data: bytes) -> None:
        owner = (self.uid, self.gid) if self.drop_uid else None
        write_under(self.root, path, data, owner)

    def cleanup(self) -> None:
        errors: list[str] = []
        for process in self._processes:
            try:
                process.kill()
            except SandboxError as e:
                errors.append(str(e))
        self._processes = []
        if not self._closed:
            shutil.rmtree(self._state, ignore_errors=True)
        self._closed = True
        if errors:
            raise SandboxError("; ".join(errors))
