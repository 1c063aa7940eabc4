"""One command in a Docker sandbox: the exec's raw stream turned into ordinary pipes.

Callers get real pipe fds (they `select`, `os.read` and `os.write` on them, as with the local
backend). Two threads per process: one demultiplexes the engine's stream into the stdout and
stderr pipes, one copies the stdin pipe into the stream (and sends EOF when the caller closes
it). The exit status comes from `ari-init run`, which runs as root (out of the command's reach)
and reports "exit N" or "signal N" through PID 1's own output, which only the harness reads
(`status`, see `sandbox.py`); if that report never comes (the container was killed), from
the engine: the exec's exit code, which is the wrapper's (128+N means signal N).
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time
from collections.abc import Callable
from typing import IO, Any

from toolkit.sandbox.base import (
    SandboxProcess,
    SandboxTeardownTimeout,
    note_teardown,
    teardown_wait_s,
)
from toolkit.sandbox.docker.engine import Hijacked

MAX_OUTPUT_BYTES = 64 * 2**20  # what `exec` keeps of each stream
KILL_TIMEOUT_S = 10.0
KILL_RESEND_S = 0.5  # how often a kill is asked for again while the command is not gone


class DockerProcess(SandboxProcess):
    """A command started with `docker exec` through `ari-init run` (see the module docstring)."""

    def __init__(
        self,
        client: Any,
        exec_id: str,
        stream: Hijacked,
        streams: list[bool],
        call_id: str,
        status: Callable[[str], int | None],
        kill_request: Callable[[str], None],
    ) -> None:
        self._client = client
        self.exec_id = exec_id
        self.call_id = call_id
        self._stream = stream
        self._status = status
        self._kill_request = kill_request
        self._code: int | None = None
        self._done = threading.Event()
        self._discard = False
        self._pid: int | None = None
        self._ours: list[int] = []  # our pipe ends, closed when the stream ends
        self.stdin: IO[bytes] | None = None
        self.stdout: IO[bytes] | None = None
        self.stderr: IO[bytes] | None = None
        self._sinks: dict[int, int] = {}
        for index, name in ((1, "stdout"), (2, "stderr")):
            if streams[index]:
                read_end, write_end = os.pipe2(os.O_CLOEXEC)
                os.set_blocking(write_end, False)
                self._sinks[index] = write_end
                setattr(self, name, os.fdopen(read_end, "rb"))
        self._feeder: threading.Thread | None = None
        if streams[0]:
            read_end, write_end = os.pipe2(os.O_CLOEXEC)
            self.stdin = os.fdopen(write_end, "wb")
            self._feeder = threading.Thread(target=self._feed, args=(read_end,), daemon=True)
            self._feeder.start()
        else:
            stream.close_input()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    # -- the threads ---------------------------------------------------------------------
    def _feed(self, fd: int) -> None:
        """Copy what the caller writes to stdin into the stream; EOF when they close it."""
        try:
            while not self._done.is_set():
                ready, _, _ = select.select([fd], [], [], 0.2)
                if not ready:
                    continue
                data = os.read(fd, 65536)
                if not data:
                    break
                self._stream.send(data)
        except OSError:
            pass
        finally:
            self._stream.close_input()
            os.close(fd)

    def _write(self, fd: int, data: bytes) -> None:
        view = memoryview(data)
        while view and not self._discard:
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:
                select.select([], [fd], [], 0.1)
            except OSError:  # the caller closed its end: nobody reads any more
                self._discard = True

    def _read(self) -> None:
        try:
            for kind, data in self._stream.frames():
                sink = self._sinks.get(kind)
                if sink is not None and not self._discard:
                    self._write(sink, data)
        finally:
            for fd in self._sinks.values():
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._stream.close()
            self._code = self._exit_code()
            self._done.set()

    def _exit_code(self) -> int:
        """The wrapper's report (sent before it exited, so as the stream ends); without one
        (the container was killed), the engine's exit code of the exec (polled until it has
        it): the wrapper's, which no sandboxed process can change, 128+N for a signal."""
        reported = self._status(self.call_id)
        if reported is not None:
            return reported
        end = time.monotonic() + KILL_TIMEOUT_S
        info: dict[str, Any] = {}
        while time.monotonic() < end:
            try:
                info = self._client.api.exec_inspect(self.exec_id)
            except Exception:
                break
            if not info.get("Running"):
                break
            time.sleep(0.005)
        code = info.get("ExitCode")
        if not isinstance(code, int):
            return -9
        return -(code - 128) if code > 128 else code

    # -- the interface -------------------------------------------------------------------
    @property
    def pid(self) -> int:
        """Host pid of the command's wrapper if the engine has started it yet, else 0 (asked
        once; crash recovery of the docker backend goes by container labels, not pids)."""
        if self._pid is None:
            self._pid = 0
            with contextlib.suppress(Exception):
                self._pid = int(self._client.api.exec_inspect(self.exec_id).get("Pid") or 0)
        return self._pid

    @pid.setter
    def pid(self, value: int) -> None:
        self._pid = value

    def wait(self, timeout: float | None = None) -> int | None:
        self._done.wait(timeout)
        return self._code if self._done.is_set() else None

    def poll(self) -> int | None:
        return self.wait(0)

    def kill(self) -> None:
        """Kill the command's whole tree (PID 1 does it) and wait until its stream has ended.

        How long the kernel takes to tear the tree down is the command's doing: waited for up
        to `teardown_wait_s()` (then `SandboxTeardownTimeout`), and logged when slow."""
        if self._done.is_set():
            return
        self._discard = True
        started = time.monotonic()
        bound = teardown_wait_s()
        # PID 1 kills only a command it can find: one killed just after its start (a call
        # cancelled at once) may not be running yet. So the request is repeated until the
        # stream ends, never lost.
        done = False
        while not done and time.monotonic() - started < bound:
            self._kill_request(self.call_id)
            left = bound - (time.monotonic() - started)
            done = self._done.wait(max(0.0, min(KILL_RESEND_S, left)))
        took = time.monotonic() - started
        self.teardown_s = max(self.teardown_s, took)
        note_teardown(f"docker command {self.call_id}", took)
        if not done:
            raise SandboxTeardownTimeout(
                f"docker command {self.call_id} was still there {bound:g} s after its kill"
            )

    def settle(self, timeout: float) -> None:
        """Wait for the reader to finish (the container is gone: its stream ends)."""
        self._discard = True
        self._done.wait(timeout)
