"""Line-by-line reading of a sandboxed process's pipe, with a deadline.

The grader speaks JSON lines with a worker over its stdin/stdout. A plain `readline()` blocks
forever on a hung worker, and `select` on a buffered file object misses what the buffer already
holds, so this reads the raw fd itself and keeps its own buffer.
"""

from __future__ import annotations

import os
import select
import time
from typing import IO


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
