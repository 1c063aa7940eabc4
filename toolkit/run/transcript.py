"""The agent's console, copied into the run folder as it comes: bounded in memory and on disk.

The agent decides what it prints, so nothing here may grow with it. A console pipe is read in
pieces of at most `PIECE_BYTES` (a line without an end is just more pieces), secrets are
redacted across piece boundaries (`Redactor`), and each console file keeps at most
`TRANSCRIPT_CAP_BYTES`. Past the cap the pipe is still drained, so the agent is never blocked
on a full pipe, but nothing more is stored: one note at the end of the file says how many bytes
were dropped, and `agent.log` says so too. What the adapter is shown (`observe`, which decides
what is echoed to the operator) is the console line by line, a line longer than
`OBSERVED_LINE_BYTES` coming in pieces of that size.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO

PIECE_BYTES = 64 * 1024  # one read of a console pipe, at most
# What one console file (`transcript.txt`; an adapter's event stream or log) may keep: ample for
# an hour of a scaffold's events and an agent's prints, and a run folder the results disk and
# the site can always afford (publishing reads it whole).
TRANSCRIPT_CAP_BYTES = 16 * 1024 * 1024
# The longest line shown to the adapter at once: a scaffold's JSON event with a long tool
# output still arrives whole; a longer line arrives in pieces of this size.
OBSERVED_LINE_BYTES = 1024 * 1024
REDACTED = b"[redacted]"
MIN_SECRET_CHARS = 8  # shorter values are not redacted (as `find_leaks` ignores them)


class Redactor:
    """Replaces secret values by `[redacted]` in a stream that comes in pieces.

    A secret may be split between two pieces: the last len(longest secret) - 1 bytes of what has
    been seen are held back until the next piece (or the end) shows whether they start one."""

    def __init__(self, secrets: list[str]) -> None:
        values = {s.encode() for s in secrets if len(s) >= MIN_SECRET_CHARS}
        self._secrets = sorted(values, key=len, reverse=True)  # a secret inside another: longest
        self._hold = max((len(s) for s in self._secrets), default=1) - 1
        self._pending = b""

    def feed(self, piece: bytes) -> bytes:
        """The redacted bytes that are safe to write now (possibly none)."""
        if not self._secrets:
            return piece
        data = self._replace(self._pending + piece)
        cut = max(0, len(data) - self._hold)
        self._pending = data[cut:]
        return data[:cut]

    def flush(self) -> bytes:
        """The end of the stream: what was held back, redacted."""
        data, self._pending = self._replace(self._pending), b""
        return data

    def _replace(self, data: bytes) -> bytes:
        for secret in self._secrets:
            data = data.replace(secret, REDACTED)
        return data


class _Lines:
    """Cuts a stream into lines for the adapter; a line never grows past `limit` bytes."""

    def __init__(self, emit: Callable[[bytes], None], limit: int = OBSERVED_LINE_BYTES) -> None:
        self._emit = emit
        self._limit = limit
        self._line = bytearray()

    def feed(self, data: bytes) -> None:
        start = 0
        while start < len(data):
            end = data.find(b"\n", start)
            if end < 0:
                self._line += data[start:]
                break
            self._line += data[start:end]
            self._send()
            start = end + 1
        while len(self._line) >= self._limit:
            self._emit(bytes(self._line[: self._limit]))
            del self._line[: self._limit]

    def flush(self) -> None:
        if self._line:
            self._send()

    def _send(self) -> None:
        line = bytes(self._line)
        self._line.clear()
        for start in range(0, max(len(line), 1), self._limit):
            self._emit(line[start : start + self._limit])


class Transcript:
    """One console file of the run (`transcript.txt`, or an adapter's own), fed by one or two
    pipes (`follow`), each in a thread of its own.

    `redact`: values (a credential) replaced by `[redacted]` before anything is written or
    shown, so that an agent printing its environment publishes no key. `log`: where the harness
    notes that the file reached its cap (`agent.log`)."""

    def __init__(
        self,
        path: Path,
        echo: Callable[[str], None] | None,
        redact: list[str] | None = None,
        *,
        log: Callable[[str], None] | None = None,
        cap_bytes: int = TRANSCRIPT_CAP_BYTES,
    ) -> None:
        self.path = path
        self._echo = echo
        self._secrets = list(redact or [])
        self._log = log
        self.cap_bytes = cap_bytes
        self.stored = 0  # bytes written to the file (the note aside)
        self.dropped = 0  # bytes past the cap: drained, not stored
        self._lock = threading.Lock()
        self._file: IO[bytes] | None = path.open("ab")
        self._threads: list[threading.Thread] = []

    def follow(self, pipe: IO[bytes] | None, echo: Callable[[str], None] | None = None) -> None:
        """Copy `pipe` in (a thread); each line also goes to `echo` (default: the one given)."""
        if pipe is None:
            return
        thread = threading.Thread(target=self._pump, args=(pipe, echo or self._echo), daemon=True)
        thread.start()
        self._threads.append(thread)

    def _pump(self, pipe: IO[bytes], echo: Callable[[str], None] | None) -> None:
        read = getattr(pipe, "read1", pipe.read)
        redactor = Redactor(self._secrets)
        lines = _Lines(lambda line: echo(line.decode("utf-8", "replace"))) if echo else None
        while True:
            try:
                piece = read(PIECE_BYTES)
            except (OSError, ValueError):  # the pipe was closed under us: the run is ending
                piece = b""
            data = redactor.feed(piece) if piece else redactor.flush()
            self._store(data)
            if lines is not None:
                lines.feed(data)
            if not piece:
                break
        if lines is not None:
            lines.flush()

    def _store(self, data: bytes) -> None:
        """Write what fits under the cap; count the rest."""
        if not data:
            return
        with self._lock:
            room = max(0, self.cap_bytes - self.stored)
            kept = data[:room]
            if kept and self._file is not None:
                try:
                    self._file.write(kept)
                    self._file.flush()
                    self.stored += len(kept)
                except OSError:  # the results volume is full: drained, counted, never fatal
                    kept = b""
                    self._abandon()
            first_drop = self.dropped == 0 and len(data) > len(kept)
            self.dropped += len(data) - len(kept)
        if first_drop and self._log is not None:
            self._log(
                f"{self.path.name} reached its cap of {self.cap_bytes:,} bytes: the rest of the "
                "agent's console is drained but not stored"
            )

    def _abandon(self) -> None:
        """Stop storing (the disk is full); what the buffer held is lost with the file."""
        file, self._file = self._file, None
        if file is not None:
            with contextlib.suppress(OSError):
                file.close()

    def close(self) -> None:
        """Wait (a little) for the pipes to end, then close the file; past the cap, end it with
        one note of how much was dropped. Bytes that come after this are dropped unseen."""
        for thread in self._threads:
            thread.join(timeout=5)
        with self._lock:
            file, self._file = self._file, None
            dropped = self.dropped
            if file is None:
                return
            try:
                if dropped:
                    file.write(self.note(dropped).encode())
                file.close()
            except OSError:
                with contextlib.suppress(OSError):
                    file.close()
        if dropped and self._log is not None:
            self._log(f"{self.path.name}: {self.note(dropped).strip()}")

    def note(self, dropped: int) -> str:
        return (
            f"\n[ari] console capped at {self.cap_bytes:,} bytes: {dropped:,} more bytes "
            "were printed and not stored\n"
        )
