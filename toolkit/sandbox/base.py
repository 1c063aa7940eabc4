"""The sandbox interface: run untrusted code somewhere it cannot reach what it must not.

One small abstract class, after Inspect's sandbox environments. A command that fails is *data*
(an `ExecResult` with its return code, or a process's exit status); a sandbox that breaks
*raises* `SandboxError`. Backends are chosen by name through `create_sandbox` (see `__init__`);
each is a package of this one whose `create` is a `SandboxFactory`.
The layer knows nothing about runs, exams or grading: callers say which paths to hide and which
to mount read-only.
"""

from __future__ import annotations

import abc
import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Protocol

from toolkit.sandbox.cores import thread_env
from toolkit.sandbox.streams import communicate


@dataclass(frozen=True)
class ExecResult:
    """The outcome of one command. A non-zero `returncode` is a result, not an error."""

    returncode: int
    """Exit status; negative = killed by that signal (as `subprocess` reports it)."""
    stdout: bytes
    stderr: bytes
    timed_out: bool
    """True when the command ran past its timeout and its whole process tree was killed."""
    duration_s: float

    @property
    def ok(self) -> bool:
        """True when the command exited 0 within its time."""
        return self.returncode == 0 and not self.timed_out


@dataclass(frozen=True)
class Limits:
    """Resource caps for each process tree started in a sandbox (None = no cap).

    `max_processes` counts threads too where it is enforced by the pids cgroup (that is what the
    kernel counts there): leave room for the threads of numeric libraries.
    """

    memory_bytes: int | None = None
    max_processes: int | None = None
    cpu_seconds: int | None = None
    file_size_bytes: int | None = None
    cpus: float | None = None
    """CPU time the tree may use per second of wall time, in cores (1.5: one and a half
    cores' worth, whichever cores); None: the host's. Enforced by the kernel's CFS quota (a
    container's `NanoCpus`, a local cgroup-v1 `cpu` hierarchy); where the host cannot, the
    sandbox lists `cpu-quota` in `not_isolated`."""
    disk_bytes: int | None = None
    """What the tree may write in total to its private writable places (/tmp, /var/tmp,
    /dev/shm, /run, ...), and under an ephemeral root (its writes go there too); past it,
    writes fail with ENOSPC. A root that is a plain host folder is not covered (`root-disk`
    in `not_isolated`): cap it with `capped.cap_folder`. None: the local backend caps the
    private places at `memory_bytes`, else at a quarter of the RAM."""


NO_LIMITS = Limits()


@dataclass(frozen=True)
class Egress:
    """One destination a sandbox without network may still open TCP connections to.

    Programs inside connect to `host:port` as usual (the name resolves inside); nothing else
    outside is reachable, and every attempt is logged by the backend (`Sandbox.egress_log`).
    This is how a controller reaches its model provider and nothing more.
    """

    host: str
    """A DNS name or an IP address, as the program inside will use it."""
    port: int
    address: str | None = None
    """Where the backend connects for `host` (an IP address); None: `host` as the host
    resolves it. Lets a sandbox reach a service of the harness under a name of the harness's
    choosing (the provider relay on a Docker network's gateway address)."""


TEARDOWN_WAIT_S = 120.0
"""Once SIGKILL is delivered to a tree, how long a backend waits for the kernel to tear it
down before it gives up with `SandboxError`. The wait is the sandboxed code's doing (hundreds
of children, each with tens of thousands of memory mappings, take many seconds to die), so it
is generous; the environment variable `ARI_TEARDOWN_WAIT_S` sets another bound (seconds)."""
TEARDOWN_ENV = "ARI_TEARDOWN_WAIT_S"
SLOW_TEARDOWN_S = 1.0
"""A teardown at least this long is logged with how long it took."""

log = logging.getLogger(__name__)


def teardown_wait_s() -> float:
    """The bound on a killed tree's teardown now in force (see `TEARDOWN_WAIT_S`)."""
    text = os.environ.get(TEARDOWN_ENV, "")
    try:
        value = float(text)
    except ValueError:
        return TEARDOWN_WAIT_S
    return value if value > 0 else TEARDOWN_WAIT_S


def note_teardown(what: str, took_s: float) -> None:
    """Log a slow teardown (the sandboxed code's doing: it is charged to it, not an error)."""
    if took_s >= SLOW_TEARDOWN_S:
        log.warning("sandbox: %s took %.1f s to be torn down after SIGKILL", what, took_s)


class SandboxError(RuntimeError):
    """The sandbox itself broke (could not be set up, lost a process): not the command's fault."""


class SandboxTeardownTimeout(SandboxError):
    """A killed process tree was still not gone `teardown_wait_s()` after SIGKILL. The code in
    it can cause this itself, so it proves no failure of the sandbox: callers decide with a
    check the sandboxed code cannot influence (`toolkit.run.reference`)."""


class SandboxRootAltered(SandboxError):
    """A command could not start because a path the sandbox keeps inside its writable root (a
    hidden one) was moved, replaced or made a link since the sandbox was made: by the root's
    own users (an agent in its workspace), so their doing, not a failure of the sandbox."""


class SandboxProcess(abc.ABC):
    """A long-lived process started in a sandbox, with pipes the host can speak over."""

    stdin: IO[bytes] | None
    stdout: IO[bytes] | None
    stderr: IO[bytes] | None
    pid: int
    """Host pid of the process that represents the tree (signal it only through `kill`)."""
    teardown_s: float = 0.0
    """The longest its tree took to be gone after a kill of the harness (0: never killed)."""

    @abc.abstractmethod
    def wait(self, timeout: float | None = None) -> int | None:
        """Exit status once it has exited; None if `timeout` seconds pass first."""

    @abc.abstractmethod
    def poll(self) -> int | None:
        """Exit status if it has exited, else None."""

    @abc.abstractmethod
    def kill(self) -> None:
        """Kill the whole tree it started, including children that setsid() or ignore SIGTERM."""


class Sandbox(abc.ABC):
    """Somewhere to run commands, with a working directory `root` the host can read and write."""

    name: str
    """Backend name: "local" or "docker"."""
    isolation: list[str]
    """The protections actually in force, e.g. ["pgroup", "pidns", "netns", "uid:nobody"]."""
    not_isolated: list[str]
    """What this backend, on this host, does not isolate (recorded with every run)."""
    root: Path
    """The sandbox's working directory (a host path for the local backend)."""
    limits: Limits
    """The caps of every process tree it starts."""

    @abc.abstractmethod
    def _spawn(
        self, argv: list[str], cwd: str | None, env: dict[str, str] | None, streams: list[bool]
    ) -> SandboxProcess:
        """Launch `argv`; `streams` says which of stdin/stdout/stderr become host pipes."""

    @abc.abstractmethod
    def _output_cap(self) -> int:
        """What `exec` keeps of each output stream, in bytes."""

    def exec(
        self,
        argv: list[str],
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        input: bytes | None = None,
        timeout: float | None = None,
    ) -> ExecResult:
        """Run `argv` to completion (or until `timeout`, then kill its tree) and collect output."""
        started = time.monotonic()
        process = self._spawn(argv, cwd, self._env(env), [input is not None, True, True])
        out, err, timed_out = communicate(process, input, timeout, self._output_cap())
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
        """Start `argv` and return at once; each True stream becomes a pipe to the host."""
        return self._spawn(argv, cwd, self._env(env), [stdin, stdout, stderr])

    def _env(self, env: dict[str, str] | None) -> dict[str, str]:
        """`env` with numeric libraries' thread pools sized to the tree's cores (`cores`)."""
        return {**thread_env(self.limits.cpus), **(env or {})}

    @abc.abstractmethod
    def read_file(self, path: str) -> bytes:
        """Bytes of `path`, relative to `root` (must not lead outside it)."""

    @abc.abstractmethod
    def write_file(self, path: str, data: bytes) -> None:
        """Write `path` relative to `root`, creating parent directories, readable in the sandbox."""

    @abc.abstractmethod
    def cleanup(self) -> None:
        """Kill every process ever started in the sandbox and release its resources. Idempotent."""

    @property
    def egress_log(self) -> list[dict[str, object]]:
        """Every attempt to reach the outside, allowed or refused, oldest first ([] when the
        sandbox has no egress allow-list). Each entry: `time` (ISO 8601, UTC), `host`, `port`
        (None for a name lookup), `protocol` ("tcp", "udp" or "dns"), `allowed` (bool) and
        `error` (why it failed or was refused; None when the connection was made)."""
        return []

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cleanup()


class SandboxFactory(Protocol):
    """What every backend package exports as `create`: `create_sandbox` less the backend's
    name, with the same meaning for each argument (`toolkit.sandbox.create_sandbox`). A backend
    that cannot honour an argument records it in `not_isolated` or ignores it where the
    argument names another backend's resource (`image` for the local one)."""

    def __call__(
        self,
        root: Path,
        *,
        network: bool,
        hide: Sequence[Path],
        limits: Limits,
        env: Mapping[str, str] | None,
        readonly: Sequence[Path],
        egress: Sequence[Egress],
        gpus: Sequence[str] | None,
        image: str | None,
        ephemeral_root: bool,
    ) -> Sandbox: ...


def relative_parts(path: str) -> Sequence[str]:
    """Split a sandbox-relative path into components; refuse absolute paths and `..`."""
    if not path or path.startswith("/"):
        raise ValueError(f"sandbox path {path!r} must be relative to the sandbox root")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise ValueError(f"sandbox path {path!r} must name a file inside the sandbox root")
    return parts
