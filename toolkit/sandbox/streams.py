"""Line-by-line reading of a sandboxed process's pipe, with a deadline.

The grader speaks JSON lines with a worker over its stdin/stdout. A plain `readline()` blocks
forever on a hung worker, and `select` on a buffered file object misses what the buffer already
holds, so this reads the raw fd itself and keeps its own buffer.
"""

from __future__ import annotations

import contextlib
import os
import select
import selectors
import time
from typing import IO, Protocol


class PipedProcess(Protocol):
    """What `communicate` needs of a process: its three pipes and a way to kill its tree
    (`toolkit.sandbox.base.SandboxProcess` is one; declared here so that this low module does
    not import the sandbox's base, which imports it)."""

    @property
    def stdin(self) -> IO[bytes] | None: ...
    @property
    def stdout(self) -> IO[bytes] | None: ...
    @property
    def stderr(self) -> IO[bytes] | None: ...
    def kill(self) -> None: ...


class LineReader:
    """Read `\\n`-terminated lines from a pipe, each within a timeout.

    `readline` returns the line including its `\\n`; at end of stream it returns what is left
    (b"" once nothing is). A line longer than `max_line` bytes is an error: a worker that floods
    the pipe must not exhaust the host's memory.
    """

    def __init__(self, stream: IO[bytes], max_line: int = 64 * 1024 * 1024):
        self._fd = stream.fileno()
        self._buffer = bytearray()
        self._eof = False
        self.max_line = max_line

    def readline(self, timeout: float | None = None) -> bytes:
        """Next line; TimeoutError if none is complete within `timeout` seconds."""
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            newline = self._buffer.find(b"\n")
            if newline >= 0:
                line = bytes(self._buffer[: newline + 1])
                del self._buffer[: newline + 1]
                return line
            if self._eof:
                rest = bytes(self._buffer)
                self._buffer.clear()
                return rest
            if len(self._buffer) > self.max_line:
                raise ValueError(f"line longer than {self.max_line} bytes from the sandbox")
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                raise TimeoutError(f"no complete line within {timeout} s")
            ready, _, _ = select.select([self._fd], [], [], left)
            if ready:
                chunk = os.read(self._fd, 1024 * 1024)
                if chunk:
                    self._buffer += chunk
                else:
                    self._eof = True


def communicate(
    process: PipedProcess, data: bytes | None, timeout: float | None, max_bytes: int
) -> tuple[bytes, bytes, bool]:
    """Feed `data`, collect stdout/stderr until both close; kill the tree at `timeout`. Of each
    stream, the first `max_bytes` are kept; the rest is read and dropped (a flood must not
    exhaust the host's memory)."""
    assert process.stdout is not None and process.stderr is not None
    chunks: dict[int, list[bytes]] = {process.stdout.fileno(): [], process.stderr.fileno(): []}
    sizes = dict.fromkeys(chunks, 0)
    pending = memoryview(data or b"")
    deadline = None if timeout is None else time.monotonic() + timeout
    timed_out = False
    with selectors.DefaultSelector() as selector:
        for fd in chunks:
            selector.register(fd, selectors.EVENT_READ)
        if process.stdin is not None:
            os.set_blocking(process.stdin.fileno(), False)
            if pending:
                selector.register(process.stdin.fileno(), selectors.EVENT_WRITE)
            else:
                process.stdin.close()
        while selector.get_map():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                if timed_out:  # an escaped holder keeps a pipe open: stop reading
                    break
                timed_out = True
                process.kill()
                deadline = time.monotonic() + 5
                continue
            for key, _ in selector.select(left):
                fd = int(key.fd)
                if fd in chunks:
                    chunk = os.read(fd, 1 << 16)
                    if not chunk:
                        selector.unregister(fd)
                    elif sizes[fd] < max_bytes:
                        chunks[fd].append(chunk[: max_bytes - sizes[fd]])
                        sizes[fd] += len(chunk)
                    continue
                try:
                    written = os.write(fd, pending[: 1 << 16])
                except BlockingIOError:
                    continue
                except BrokenPipeError:
                    written = len(pending)
                pending = pending[written:]
                if not pending:
                    selector.unregister(fd)
                    assert process.stdin is not None
                    process.stdin.close()
    if process.stdin is not None and not process.stdin.closed:
        with contextlib.suppress(BrokenPipeError):
            process.stdin.close()
    process.stdout.close()
    process.stderr.close()
    out, err = (b"".join(chunks[fd]) for fd in chunks)
    return out, err, timed_out
