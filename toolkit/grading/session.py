"""The host's end of the pipe to one grading worker, with a deadline on every exchange.

The worker (`worker.py`) runs in a sandbox; this class starts it, drains its stderr in a thread
(a bundle that prints megabytes must not block on a full pipe; only a tail is kept for the
report), and exchanges frames `MAGIC + nonce + length + JSON`. Anything else on the pipe, a
missed deadline or the worker's death becomes a `WorkerFailure`; the caller kills the worker's
whole tree through the sandbox.

A `WorkerFailure` has two parts. Its `category` says what happened in words the harness wrote
itself (`Kind`, `Where`) and numbers the harness knows (a batch number, a time limit, an exit
status): nothing the bundle's code chose as text can get into it, and `str()` of the failure is
the category alone. Its `detail` holds what the bundle said (its error text, its last stderr
output, what was wrong with its reply); a hidden grading sends that only to the operator log
(`secret_log`), public scoring shows it to the agent that wrote the bundle.
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
from dataclasses import dataclass
from enum import Enum
from typing import Any

from toolkit.sandbox import Sandbox, SandboxProcess

MAGIC = b"ARIG"
NONCE_ENV = "ARI_GRADER_NONCE"
MAX_FRAME = 256 * 2**20  # far above any honest reply (logprobs of one batch: ~50 KB)
STDERR_TAIL = 2000
"""The most of a worker's stderr that is kept: a dead worker's failure gives it whole to the
operator log (a Python traceback's last frames and its error line fit)."""
PUBLIC_TAIL = 300
"""The most of it that public scoring shows (the agent's feedback, kept in the run's history)."""


class Where(Enum):
    """Which part of a grading failed (the start of a category)."""

    GRADING = ""
    """The grading as a whole (the category is the kind alone)."""
    LOAD = "load()"
    GENERATE = "generate() on batch {}"
    LOGPROBS = "next_byte_logprobs() on batch {}"


class Kind(Enum):
    """What went wrong: the closed list of failure categories, `{}` filled with numbers."""

    CANCELLED = "grading cancelled: the call's time or the run is over"
    TOO_LARGE = "packed bundle is {:,} bytes, over the {:,}-byte limit"
    REJECTED = "the bundle could not be packed or unpacked"
    LOAD_TIME = "did not finish within {:g} s"
    BATCH_TIME = "took longer than the {:g} s limit per batch"
    PHASE_TIME = "the phase ran past its {:g} s limit"
    RAISED = "the bundle raised an error"
    MALFORMED = "the worker's reply is malformed"
    NOT_JSON = "the worker sent a frame that is not a JSON object"
    NOT_FRAME = "the worker's pipe carried bytes that are not a grader frame"
    OVERSIZED = "the worker sent a reply larger than the {:,} bytes an honest reply needs"
    STOPPED_READING = "the worker stopped reading its input"
    EXITED = "crashed: the worker exited with status {}"
    SIGNALLED = "crashed: the worker was killed by signal {}"
    LIMIT_KILLED = "crashed: the worker was killed (signal 9: a memory or process limit)"
    KILLED = "crashed: the worker was killed"
    WRONG_COUNT = "the worker's reply is malformed: not one output per prompt ({} prompts)"
    NOT_LOGPROBS = "not log-probabilities over 256 bytes"


Number = int | float


def _numbers(values: tuple[object, ...]) -> tuple[Number, ...]:
    """`values`, checked to be plain numbers (no text, no subclass that formats itself)."""
    for value in values:
        if type(value) not in (int, float):
            raise TypeError(f"a failure category holds numbers only, not {type(value).__name__}")
    return values  # type: ignore[return-value]


@dataclass(frozen=True)
class Category:
    """A failure as published: harness words (`Where`, `Kind`) and harness numbers only."""

    kind: Kind
    numbers: tuple[Number, ...] = ()
    where: Where = Where.GRADING
    batch: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.kind, Kind) or not isinstance(self.where, Where):
            raise TypeError("a failure category is built from Kind and Where only")
        _numbers((*self.numbers, *([] if self.batch is None else [self.batch])))
        if self.kind.value.count("{") != len(self.numbers):
            raise ValueError(f"{self.kind.name} takes {self.kind.value.count('{')} numbers")
        if ("{}" in self.where.value) != (self.batch is not None):
            raise ValueError(f"{self.where.name}: a batch number where and only where it has {{}}")

    def __str__(self) -> str:
        what = self.kind.value.format(*self.numbers)
        if self.where is Where.GRADING:
            return what
        where = self.where.value.format(self.batch) if self.batch is not None else self.where.value
        return f"{where}: {what}"

    def at(self, where: Where, batch: int | None = None) -> Category:
        """The same failure, placed in a part of the grading."""
        return Category(self.kind, self.numbers, where, batch)


class WorkerFailure(Exception):
    """The worker timed out, died, or broke the protocol.

    `str()` is the category only (safe to publish); `detail` is what the bundle said, short, for
    public scoring (`text(public=True)`); `log_detail` is the same at more length (a traceback,
    the whole kept stderr tail) for the operator log, and `detail` where there is no more.
    """

    def __init__(self, category: Category, detail: str = "", log_detail: str = "") -> None:
        if not isinstance(category, Category):
            raise TypeError("WorkerFailure takes a Category")
        super().__init__(str(category))
        self.category = category
        self.detail = detail
        self.log_detail = log_detail or detail

    def text(self, *, public: bool) -> str:
        """The reason for the report: the category, and on a public grading the detail too."""
        if public and self.detail:
            return f"{self.category}: {self.detail}"
        return str(self.category)

    def at(self, where: Where, batch: int | None = None) -> WorkerFailure:
        """This failure placed in a part of the grading (raise it `from None`)."""
        return type(self)(self.category.at(where, batch), self.detail, self.log_detail)


DRAIN_AFTER_EXIT_S = 2.0
"""How long a dead worker's stderr may still be read before its failure is reported."""


class WorkerTimeout(WorkerFailure):
    """A reply did not come in time."""

    def __init__(
        self, category: Category | None = None, detail: str = "", log_detail: str = ""
    ) -> None:
        super().__init__(category or Category(Kind.STOPPED_READING), detail, log_detail)


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

    def stderr_tail(self) -> str:
        """The last bytes the bundle wrote to stderr/stdout (`STDERR_TAIL`), as one printable
        line."""
        text = b"".join(self._stderr)[-STDERR_TAIL:].decode("utf-8", "replace")
        return " ".join(text.split())

    # -- frames ---------------------------------------------------------------------------
    def send(self, message: dict[str, Any], deadline: float) -> None:
        body = json.dumps(message).encode()
        data = MAGIC + self.nonce + struct.pack(">I", len(body)) + body
        while data:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WorkerTimeout(Category(Kind.STOPPED_READING))
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
            raise WorkerFailure(Category(Kind.NOT_FRAME))
        (size,) = struct.unpack(">I", head[-4:])
        limit = min(max_bytes, MAX_FRAME)
        if size > limit:
            raise WorkerFailure(Category(Kind.OVERSIZED, (limit,)), f"{size:,} bytes")
        try:
            message = json.loads(self._read(size, deadline))
        except (ValueError, RecursionError):  # RecursionError: JSON nested thousands deep
            raise WorkerFailure(Category(Kind.NOT_JSON), "not JSON") from None
        if not isinstance(message, dict):
            raise WorkerFailure(Category(Kind.NOT_JSON), f"a JSON {type(message).__name__}")
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
                raise WorkerTimeout(detail="no reply in time")
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
        # Its last words may still sit in the stderr pipe: the drain ends at the pipe's end (a
        # descendant still holding the pipe open costs at most the timeout). Read late on a busy
        # host, they were missing from the operator's log and from public scoring's reason.
        self._drain.join(timeout=DRAIN_AFTER_EXIT_S)
        tail = self.stderr_tail()
        if not tail:
            return WorkerFailure(exit_category(code))
        return WorkerFailure(
            exit_category(code),
            f"its last output: {tail[-PUBLIC_TAIL:]}",
            f"its last output: {tail}",
        )

    def close(self) -> None:
        """Kill the worker's whole tree. Not a polite "bye" first: nothing of the worker's is
        worth an orderly exit, and tearing down a CUDA context takes a while that the next
        phase would wait out (it starts only once every process of this one is gone)."""
        self.process.kill()
        self._drain.join(timeout=5)


def exit_category(code: int | None) -> Category:
    """How a worker ended, as a category: its exit status (0-255) or signal, nothing else."""
    if code in (-9, 137):
        return Category(Kind.LIMIT_KILLED)
    if code is None or not -64 <= code <= 255:
        return Category(Kind.KILLED)
    if code < 0:
        return Category(Kind.SIGNALLED, (-code,))
    return Category(Kind.EXITED, (code,))
