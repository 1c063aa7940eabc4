"""Append-only JSON-lines logs in which each entry carries the hash of the line before it.

Both the submission history and the audit log are such logs. Editing any line breaks the chain
at the next one; cutting the file mid-line leaves a line without its newline; dropping whole
lines from the end leaves a valid prefix, which only an anchor kept elsewhere can catch: the
harness keeps the head (entry count and last hash) in memory while the run lasts and checks the
file against it before grading, and a published result lists every candidate, so a history
shorter than the result is caught afterwards too (`check_against`).

Each append is flushed and fsynced, so that a harness killed with SIGKILL loses nothing that a
reply was already sent for. An append is all or nothing: a line the file system cannot take
whole (a full disk, a quota) is cut back off the file and the error raised (`AppendError`), so
a failed append leaves the log as it was, never a cut line that reads as tampering.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
import threading
from pathlib import Path
from typing import Any

from toolkit.results import bounded_json

GENESIS = "0" * 64
# The largest chained log read (an audit log of a run is far smaller): a larger one, or one
# that is not a plain file, is a `ChainError`, never read whole or waited on.
CHAIN_LIMIT = 64 * 1024 * 1024


class ChainError(ValueError):
    """A log whose chain is broken; the message names the file and line."""


def disk_full(exc: BaseException) -> bool:
    """Whether `exc` is a volume saying it is full (or over a quota)."""
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


class AppendError(OSError):
    """An entry the log could not take whole (`errno` says why: ENOSPC for a full disk); the
    file was cut back to where it was, so the chain is intact and nothing was recorded."""


def line_hash(line: bytes) -> str:
    return hashlib.sha256(line).hexdigest()


def read_chain(path: Path) -> list[dict[str, Any]]:
    """Read and verify a chained log; raise `ChainError` naming the first bad line."""
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):
            raise ChainError(f"{path}: not a plain file")
        if st.st_size > CHAIN_LIMIT:  # refused by its size, never read whole
            raise ChainError(f"{path}: {st.st_size:,} bytes, more than {CHAIN_LIMIT:,}")
        with path.open("rb") as f:
            data = f.read(CHAIN_LIMIT + 1)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise ChainError(f"{path}: cannot read: {exc}") from exc
    if len(data) > CHAIN_LIMIT:
        raise ChainError(f"{path}: more than {CHAIN_LIMIT:,} bytes")
    if data and not data.endswith(b"\n"):
        raise ChainError(f"{path}: the last line is cut short (no newline): file truncated")
    entries: list[dict[str, Any]] = []
    prev = GENESIS
    for n, line in enumerate(data.splitlines(keepends=True), 1):
        try:
            entry = bounded_json.loads(line)
        except json.JSONDecodeError as exc:
            raise ChainError(f"{path}:{n}: not JSON ({exc.msg}): file edited or cut") from exc
        if not isinstance(entry, dict):
            raise ChainError(f"{path}:{n}: not a JSON object")
        if entry.get("seq") != n:
            raise ChainError(f"{path}:{n}: sequence number {entry.get('seq')!r}, expected {n}")
        if entry.get("prev") != prev:
            raise ChainError(f"{path}:{n}: previous-entry hash does not match: the log was edited")
        prev = line_hash(line)
        entries.append(entry)
    return entries


def _append_whole(fd: int, line: bytes, path: Path) -> None:
    """Write `line` at the end of the file open as `fd` (O_APPEND) and fsync it, or leave the
    file as it was and raise `AppendError`: a short write (the disk filled mid-line) or a
    failed write or fsync is cut back off with ftruncate to the size before it."""
    size = os.fstat(fd).st_size
    try:
        written = os.write(fd, line)
        while written < len(line):  # a short write: try the rest once more (it may fit)
            more = os.write(fd, line[written:])
            if more <= 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            written += more
        os.fsync(fd)
    except OSError as exc:
        try:
            os.ftruncate(fd, size)
            os.fsync(fd)
        except OSError as cut:  # cannot even cut it back: the log is damaged, say so
            raise AppendError(
                exc.errno or errno.EIO,
                f"{path}: an entry could not be written ({exc.strerror}), nor cut back off "
                f"({cut.strerror}): the log is damaged",
            ) from exc
        raise AppendError(
            exc.errno or errno.EIO,
            f"{path}: an entry could not be written ({exc.strerror or exc}); cut back off, "
            "nothing recorded",
        ) from exc


class ChainedLog:
    """An append-only chained log, safe to append from several threads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        # Resume after an existing file (a recovered run), verifying it first.
        existing = read_chain(path)
        self.count = len(existing)
        self.head = line_hash(self._last_line()) if existing else GENESIS

    def _last_line(self) -> bytes:
        return self.path.read_bytes().splitlines(keepends=True)[-1]

    def append(self, entry: dict[str, Any]) -> dict[str, Any]:
        """Append `entry` (plus `seq` and `prev`) durably; return what was written."""
        with self._lock:
            full = {"seq": self.count + 1, "prev": self.head, **entry}
            line = (json.dumps(full, sort_keys=True, ensure_ascii=False) + "\n").encode()
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                _append_whole(fd, line, self.path)
            finally:
                os.close(fd)
            self.count += 1
            self.head = line_hash(line)
            return full

    def verify(self) -> list[dict[str, Any]]:
        """Re-read the file and check it against the head this process wrote."""
        with self._lock:
            entries = read_chain(self.path)
            if len(entries) != self.count:
                raise ChainError(
                    f"{self.path}: holds {len(entries)} entries, the harness wrote {self.count}: "
                    "entries were removed or added behind the harness's back"
                )
            if entries and line_hash(self._last_line()) != self.head:
                raise ChainError(f"{self.path}: the last entry was replaced")
            return entries


def chain_head(path: Path) -> tuple[int, str]:
    """(entries, hash of the last line) of a verified chained log; (0, GENESIS) if absent."""
    entries = read_chain(path)
    if not entries:
        return 0, GENESIS
    return len(entries), line_hash(path.read_bytes().splitlines(keepends=True)[-1])
