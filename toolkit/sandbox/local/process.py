"""Host-side handles on local sandboxed process trees: start, talk, wait, kill, collect.

The launcher (`launcher.py`) forks each tree's first process (PID 1 of its namespace); the
host is not its parent, so it follows it through a pidfd the launcher hands over (race-free
waiting and signalling, no pid reuse) and learns the command's own exit status from the status
pipe ("ok" when it is about to exec, or why set-up failed; then "exit N").
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import IO

from toolkit.sandbox.base import (
    SandboxError,
    SandboxProcess,
    SandboxRootAltered,
    SandboxTeardownTimeout,
    note_teardown,
    teardown_wait_s,
)
from toolkit.sandbox.local import host

# The launcher is stdlib-only by design, so the host side can share its /proc walk.
from toolkit.sandbox.local.launcher import descendants, zombie
from toolkit.sandbox.local.mounts import RootAltered

MAX_OUTPUT_BYTES = 256 * 1024 * 1024
"""Per stream, what `exec` keeps; the rest is read and dropped so a flood cannot exhaust memory."""


def _all_gone(pids: set[int], timeout: float) -> bool:
    """Wait until every pid is dead (gone or a zombie): SIGKILL is delivered, not instant."""
    end = time.monotonic() + timeout
    for pid in pids:
        while True:
            try:
                with open(f"/proc/{pid}/stat", "rb") as f:
                    if zombie(pid, f.read().rsplit(b")", 1)[1].split()[0]):
                        break
            except OSError:
                break
            if time.monotonic() > end:
                return False
            time.sleep(0.005)
    return True


def _sigkill(send: Callable[[int, int], None], target: int) -> None:
    """SIGKILL `target` (a pid, group or pidfd) if it still exists."""
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        send(target, signal.SIGKILL)


class LocalProcess(SandboxProcess):
    """A process tree started by `LocalSandbox`; `kill` takes down everything it started.

    Safe to use from several threads at once (a call's thread waits on it while the sandbox's
    cleanup kills it). Its two descriptors (the status pipe and the pidfd) are closed exactly
    once, and only when no thread is inside a `select` or `read` on them: a descriptor closed
    under another thread fails it with EBADF, and one closed twice closes whatever file took
    its number meanwhile, in any thread of the process.
    """

    def __init__(
        self,
        cgroups: host.ProcessCgroups,
        status_fd: int,
        stdin: IO[bytes] | None,
        stdout: IO[bytes] | None,
        stderr: IO[bytes] | None,
    ):
        self._cgroups = cgroups
        os.set_blocking(status_fd, False)  # two threads woken for one chunk: neither blocks
        self._status_fd: int | None = status_fd
        self._status_eof = False
        self._status = b""
        self._pidfd: int | None = None
        self._code: int | None = None
        self._lock = threading.Lock()  # guards everything above
        self._users = 0  # threads holding the descriptors (see `_held`)
        self._retired = False  # settled: close the descriptors once the last user lets go
        self.pid = -1
        self.teardown_s = 0.0  # the longest its tree took to die after a SIGKILL of ours
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr

    @contextlib.contextmanager
    def _held(self) -> Iterator[tuple[int | None, int | None]]:
        """The status pipe (None at its end) and the pidfd, kept open until the block ends;
        (None, None) once the tree is settled."""
        with self._lock:
            if self._retired:
                fds: tuple[int | None, int | None] = (None, None)
            else:
                fds = (None if self._status_eof else self._status_fd, self._pidfd)
            self._users += 1
        try:
            yield fds
        finally:
            with self._lock:
                self._users -= 1
                self._close_if_unused()

    def _close_if_unused(self) -> None:
        """Close the descriptors if the tree is settled and nobody holds them (lock held)."""
        if not self._retired or self._users:
            return
        for fd in (self._pidfd, self._status_fd):
            if fd is not None:
                os.close(fd)
        self._pidfd = self._status_fd = None

    # -- the status pipe -----------------------------------------------------------------
    def _read_status(self, timeout: float) -> bool:
        """Read what the launcher said within `timeout`; False once the pipe is at EOF."""
        with self._held() as (status_fd, _):
            if status_fd is None:
                return False
            ready, _, _ = select_fds([status_fd], timeout)
            if not ready:
                return True
            with self._lock:
                try:
                    chunk = os.read(status_fd, 4096)
                except BlockingIOError:  # another thread took it
                    return True
                self._status += chunk
                if not chunk:
                    self._status_eof = True
            return bool(chunk)

    def await_setup(self, timeout: float) -> None:
        """Block until the command is exec'd; SandboxError (tree killed) if set-up failed."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            lines = self._status.split(b"\n")
            if b"ok" in lines[:-1]:
                return
            if any(line.startswith(b"ari-sandbox:") for line in lines[:-1]):
                break
            if not self._read_status(0.05):
                break
        self.kill()
        reason = next(
            (line for line in self._status.split(b"\n") if line.startswith(b"ari-sandbox:")),
            b"the launcher died during set-up",
        )
        text = reason.decode(errors="replace")
        mark = "ari-sandbox: " + RootAltered.MARK
        if text.startswith(mark):
            raise SandboxRootAltered(text.removeprefix(mark))
        raise SandboxError(f"local sandbox set-up failed: {text}")

    def adopt(self, pid: int, pidfd: int) -> None:
        """The tree's first process, as the launcher forked it (its pidfd is now ours)."""
        self.pid = pid
        with self._lock:
            self._pidfd = pidfd

    # -- lifetime ------------------------------------------------------------------------
    def _alive(self, timeout: float = 0) -> bool:
        """Whether the tree's first process still runs; waits up to `timeout` for its end."""
        with self._held() as (_, pidfd):
            if pidfd is None:
                return False
            ready, _, _ = select_fds([pidfd], timeout)
            return not ready

    def _reported_exit(self) -> int | None:
        for line in self._status.split(b"\n")[:-1]:
            if line.startswith(b"exit "):
                return int(line[5:])
        return None

    def wait(self, timeout: float | None = None) -> int | None:
        """The command's exit status once it and its whole tree are gone; None on timeout.

        The launcher writes "exit N" only after it has killed and reaped everything else the
        command left (`supervise`), so that line alone ends the wait: the launcher's own exit
        (tearing the namespaces down costs kernel RCU grace periods) is not waited for.
        """
        end = None if timeout is None else time.monotonic() + timeout
        while self._code is None:
            code = self._reported_exit()
            if code is not None:
                self._settle(code)
                break
            with self._held() as (status_fd, pidfd):
                if status_fd is None or pidfd is None or not self._alive():
                    self._read_status(0)  # a last line may have come with the launcher's end
                    self._settle(self._reported_exit())
                    break
                left = 1e9 if end is None else max(0.0, end - time.monotonic())
                ready, _, _ = select_fds([status_fd, pidfd], left)
            if status_fd in ready:
                self._read_status(0)
            elif not ready and left <= 0:
                return None
        return self._code

    def poll(self) -> int | None:
        return self.wait(0)

    def kill(self) -> None:
        if self._code is not None:
            return
        self._kill_tree()
        while self._read_status(2.0):  # it may have ended on its own just before
            pass
        self._settle(self._reported_exit())

    def _settle(self, code: int | None) -> None:
        """Record the status and let go of the tree. No status: the launcher was killed (by us,
        or by the kernel for memory) before the command ended: SIGKILL, as subprocess says.
        The first status recorded is the one kept (another thread may settle meanwhile)."""
        if code is None:
            self._kill_tree()  # make sure, whoever killed it
            code = -signal.SIGKILL
        with self._lock:
            if self._code is None:
                self._code = code
            self._retired = True
            self._close_if_unused()
        self._cgroups.remove(wait=False)  # the launcher may still be leaving them

    @property
    def settled(self) -> bool:
        """Over and fully released: nothing left for the sandbox's cleanup to do."""
        return self._code is not None and not self._cgroups.dirs

    def release(self) -> None:
        """Kill what is left and remove its cgroups for good (the sandbox's cleanup)."""
        self.kill()
        self._cgroups.remove(wait=True)

    def _kill_tree(self) -> None:
        # The first process leads its own session and, as PID 1, its death ends the namespace.
        # Without one, it is a subreaper: escaped orphans stay its descendants, so kill those
        # first (repeatedly: they may be forking), then it. Cgroups catch the rest.
        # Once SIGKILL is sent, how long the kernel takes to tear the tree down is the code's
        # doing (hundreds of children with tens of thousands of mappings each take seconds):
        # waited for, up to `teardown_wait_s()`, and logged when slow.
        # Every step below goes on only while something of the tree is still there, so a
        # teardown that took longer than the bound was still there when the bound passed: a
        # timeout however it ends (the same bundle gets the same verdict on a loaded box,
        # where the walk of a dying swarm alone can take longer than the bound).
        killed: set[int] = set()
        started = time.monotonic()
        bound = teardown_wait_s()
        end = started + bound
        self._cgroups.kill()  # cgroup v2: the whole tree at once, forks in flight included
        if self._alive():
            for _ in range(1000):  # never cut short: what escapes this walk lives on
                doomed = descendants(self.pid) if self._alive() else []
                if not doomed:
                    break
                for pid in doomed:
                    _sigkill(os.kill, pid)
                killed.update(doomed)
            with self._held() as (_, pidfd):
                if pidfd is not None:
                    _sigkill(signal.pidfd_send_signal, pidfd)
            if self.pid > 0:
                _sigkill(os.killpg, self.pid)
        gone = not self._alive(max(0.0, end - time.monotonic()))
        gone = gone and _all_gone(killed, max(0.0, end - time.monotonic()))
        gone = gone and self._cgroups.kill_all(max(0.0, end - time.monotonic()))
        took = time.monotonic() - started
        self.teardown_s = max(self.teardown_s, took)
        note_teardown(f"sandboxed tree {self.pid}", took)
        if not gone or took > bound:
            raise SandboxTeardownTimeout(
                f"processes of sandboxed tree {self.pid} were still there {bound:g} s after SIGKILL"
            )


def select_fds(fds: list[int], timeout: float) -> tuple[list[int], list[int], list[int]]:
    """select() for reading; a huge timeout means "wait as long as it takes"."""
    return select.select(fds, [], [], min(timeout, 1e7))
