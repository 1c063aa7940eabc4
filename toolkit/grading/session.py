"""The host's end of the pipe to one grading worker, with a deadline on every exchange.

The worker (`worker.py`) runs in a sandbox; this class starts it, drains its stderr in a thread
(a bundle that prints megabytes must not block on a full pipe; only a tail is kept for the
report), and exchanges frames `MAGIC + nonce + length + JSON`. Anything else on the pipe, a
missed deadline or the worker's death becomes a `WorkerFailure` with a one-line reason; the
caller kills the worker's whole tree through the sandbox.
"""

from __future__ import annotations

import json
import os
import secrets
import select
import struct
import threading
import time
from collections import deque
from typing import Any

from toolkit.sandbox import Sandbox, SandboxProcess

MAGIC = b"ARIG"
NONCE_ENV = "ARI_GRADER_NONCE"
MAX_FRAME = 256 * 2**20  # far above any honest reply (logprobs of one batch: ~50 KB)
STDERR_TAIL = 2000


class WorkerFailure(Exception):
    """The worker timed out, died, or broke the protocol; `str()` is the reason for the report."""


class WorkerTimeout(WorkerFailure):
    """A reply did not come in time."""


class WorkerSession:
    """One worker process in a sandbox, and the framed pipe to it."""

    def __init__(self, sandbox: Sandbox, argv: list[str]) -> None:
        self.nonce = secrets.token_hex(8).encode()
        self.process: SandboxProcess = sandbox.start(argv, env={NONCE_ENV: self.nonce.decode()})
        if self.process.stdin is None or self.process.stdout is None:
            raise RuntimeError("sandbox did not give the worker stdin/stdout pipes")
        self._in = self.process.stdin.fileno()
        self._out = self.process.stdout.fileno()
        os.set_blocking(self._in, False)
        self._buffer = b""
        self._stderr: deque[bytes] = deque()
        self._stderr_size = 0
        self._drain = threading.Thread(target=self._drain_stderr, daemon=True)
        self._drain.start()

    # -- stderr: keep a tail, never block the worker -------------------------------------
    def _drain_stderr(self) -> None:
        stream = self.process.stderr
        if stream is None:
            return
        while chunk := os.read(stream.fileno(), 65536):
            self._stderr.append(chunk)
            self._stderr_size += len(chunk)
            while self._stderr_size - len(self._stderr[0]) > STDERR_TAIL:
                self._stderr_size -= len(self._stderr.popleft())

    def stderr_tail(self, limit: int = 300) -> str:
        """The last bytes the bundle wrote to stderr/stdout, as one printable line."""
        text = b"".join(self._stderr)[-limit:].decode("utf-8", "replace")
        return " ".join(text.split())

    # -- frames ---------------------------------------------------------------------------
    def send(self, message: dict[str, Any], deadline: float) -> None:
        body = json.dumps(message).encode()
        data = MAGIC + self.nonce + struct.pack(">I", len(body)) + body
        while data:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WorkerTimeout("the worker stopped reading its input")
            _, ready, _ = select.select([], [self._in], [], remaining)
            if ready:
                try:
                    data = data[os.write(self._in, data) :]
                except (BrokenPipeError, ConnectionResetError):
                    raise self._died() from None

    def receive(self, deadline: float, max_bytes: int = MAX_FRAME) -> dict[str, Any]:
        """The next frame as a JSON object; `max_bytes`: the most an honest reply needs.

        The size is checked from the frame's header, before its body is read.
        """
        head_size = len(MAGIC) + len(self.nonce) + 4
        head = self._read(head_size, deadline)
        if head[: head_size - 4] != MAGIC + self.nonce:
            raise WorkerFailure("the worker's pipe carried bytes that are not a grader frame")
        (size,) = struct.unpack(">I", head[-4:])
        limit = min(max_bytes, MAX_FRAME)
        if size > limit:
            raise WorkerFailure(
                f"the worker sent a {size:,}-byte reply, more than the {limit:,} bytes an honest "
                "reply to this request needs"
            )
        try:
            message = json.loads(self._read(size, deadline))
        except (ValueError, RecursionError):  # RecursionError: JSON nested thousands deep
            raise WorkerFailure("the worker sent a frame that is not JSON") from None
        if not isinstance(message, dict):
            raise WorkerFailure("the worker sent a frame that is not a JSON object")
        return message

    def request(
        self, message: dict[str, Any], deadline: float, max_bytes: int = MAX_FRAME
    ) -> dict[str, Any]:
        self.send(message, deadline)
        return self.receive(deadline, max_bytes)

    def _read(self, size: int, deadline: float) -> bytes:
        while len(self._buffer) < size:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WorkerTimeout("no reply in time")
            ready, _, _ = select.select([self._out], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(self._out, 1 << 20)
            if not chunk:
                raise self._died()
            self._buffer += chunk
        data, self._buffer = self._buffer[:size], self._buffer[size:]
        return data

    def _died(self) -> WorkerFailure:
        code = self.process.wait(timeout=5)
        how = "was killed" if code is None else f"exited with status {code}"
        if code is not None and code < 0:
            how = f"was killed by signal {-code}"
        if code in (-9, 137):
            how += " (a memory or process limit, or the sandbox)"
        tail = self.stderr_tail()
        return WorkerFailure(f"the worker {how}" + (f"; its last output: {tail}" if tail else ""))

    def close(self, deadline: float | None = None) -> None:
        """Ask the worker to exit, then kill its whole tree whatever it did."""
        try:
            self.send({"op": "bye"}, deadline or time.monotonic() + 1)
            self.process.wait(timeout=1)
        except (WorkerFailure, OSError):
            pass
        self.process.kill()
        self._drain.join(timeout=5)
