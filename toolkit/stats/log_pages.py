"""The log pages of a run: its artifacts cut into pages, the audit log as a table.

Part of the site's plan (`toolkit.stats.site_plan`): pure functions from an artifact's text to
what a log page shows. An audit line that is not a JSON object (or nests too deep to read:
`toolkit.results.bounded_json`) is shown as it is, as an unreadable line.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field

from toolkit.results import bounded_json
from toolkit.runner.audit import decode_arg

ARTIFACT_PAGE_BYTES = 96 * 1024  # one page of a transcript view: big enough, fast to load
AUDIT_ARTIFACT = "audit"  # the runner's audit log (JSON lines), shown as a table


def paginate(text: str, page_bytes: int = ARTIFACT_PAGE_BYTES) -> list[str]:
    """Split text into pages of about `page_bytes`, on line boundaries (one page at least)."""
    pages: list[str] = []
    current: list[str] = []
    size = 0
    for line in text.splitlines(keepends=True):
        if current and size + len(line) > page_bytes:
            pages.append("".join(current))
            current, size = [], 0
        current.append(line)
        size += len(line)
    pages.append("".join(current))
    return pages


@dataclass
class ShownArg:
    """One argument of a `runner` call, as the audit table shows it.

    `text` is shell-quoted, so that a call reads (and pastes) as the command it was. An argument
    the log recorded as bytes (`{"b64": ...}`: not UTF-8) is `binary`: shown in bash's `$'...'`
    quoting with each byte that is not text as `\\xNN`, which gives back its exact bytes. One the
    log holds in neither form is `unreadable`, shown as the JSON it is.
    """

    text: str
    binary: bool = False
    unreadable: bool = False


@dataclass
class AuditCall:
    """One `runner` call of the audit log, as a table row."""

    seq: str
    time: str  # seconds into the run, e.g. '128.4 s'
    at: str  # wall-clock time (UTC), for the tooltip
    call: str  # the arguments' texts, joined by spaces
    status: str  # the exit status, or what the harness noted (refused, timed out...)
    duration: str
    args: list[ShownArg] = field(default_factory=list)


def _seconds(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


_C_ESCAPES = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def bytes_quoted(data: bytes) -> str:
    """`data` in bash's `$'...'` quoting: UTF-8 text stays text, every other byte is `\\xNN`."""
    out = []
    for ch in data.decode("utf-8", "surrogateescape"):
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8
            out.append(f"\\x{code - 0xDC00:02x}")
        elif ch in _C_ESCAPES:
            out.append(_C_ESCAPES[ch])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        else:
            out.append(ch)
    return "$'" + "".join(out) + "'"


def shown_arg(item: object) -> ShownArg:
    """One recorded argument (text, or `{"b64": ...}` for bytes) as the table shows it."""
    if isinstance(item, str):
        return ShownArg(shlex.quote(item))
    if isinstance(item, dict) and set(item) == {"b64"} and isinstance(item["b64"], str):
        try:
            return ShownArg(bytes_quoted(decode_arg(item)), binary=True)
        except ValueError:  # not base64 (binascii.Error is a ValueError)
            pass
    return ShownArg(json.dumps(item, ensure_ascii=False), unreadable=True)


def audit_calls(text: str) -> list[AuditCall]:
    """The audit log's lines as table rows; a line that is not a JSON object is shown raw."""
    calls: list[AuditCall] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            entry = bounded_json.loads(line)
        except json.JSONDecodeError:
            entry = None
        if not isinstance(entry, dict):
            calls.append(AuditCall("?", "—", "", line, "unreadable line", "—"))
            continue
        argv = entry.get("argv")
        if isinstance(argv, list):
            args = [shown_arg(a) for a in argv]
        elif argv is None:  # refused before its arguments could be read: the note says why
            args = []
        else:
            args = [shown_arg(argv)]
        call = " ".join(a.text for a in args) or "—"
        start, end = _seconds(entry.get("start_s")), _seconds(entry.get("end_s"))
        code, note = entry.get("exit_code"), entry.get("note")
        status = "—" if code is None else str(code)
        if note:
            status = f"{status} ({note})" if code is not None else str(note)
        calls.append(
            AuditCall(
                seq=str(entry.get("seq", "?")),
                time="—" if start is None else f"{start:.1f} s",
                at=str(entry.get("start", "")),
                call=call,
                status=status,
                duration="—" if start is None or end is None else f"{end - start:.1f} s",
                args=args,
            )
        )
    return calls


@dataclass
class LogSection:
    """One part of one artifact, shown on a log page."""

    name: str
    part: int
    parts: int
    text: str

    @property
    def anchor(self) -> str:
        """Its id on the log page: the artifact's name (someone else's text) in letters,
        digits, `_` and `-` only."""
        return f"{re.sub(r'[^A-Za-z0-9_-]+', '-', self.name)}-{self.part}"

    @property
    def calls(self) -> list[AuditCall] | None:
        """The audit log as table rows (other artifacts: None, shown as text)."""
        return audit_calls(self.text) if self.name == AUDIT_ARTIFACT else None


@dataclass
class PagerLink:
    """One entry of a log page's pager: a page number, or a gap ('…')."""

    label: str
    url: str | None
    current: bool = False


def log_pages(
    artifacts: list[tuple[str, str]], page_bytes: int = ARTIFACT_PAGE_BYTES
) -> list[list[LogSection]]:
    """Split a run's artifacts into pages of about `page_bytes`.

    A large artifact is cut into parts on line boundaries; small ones share a page. A run with
    a few small logs thus makes one page, not one per log: on a large board the number of
    files written dominated the build time.
    """
    sections: list[LogSection] = []
    for name, text in artifacts:
        parts = paginate(text, page_bytes)
        sections += [LogSection(name, i + 1, len(parts), p) for i, p in enumerate(parts)]
    pages: list[list[LogSection]] = []
    size = 0
    for section in sections:
        if not pages or (size + len(section.text) > page_bytes and pages[-1]):
            pages.append([])
            size = 0
        pages[-1].append(section)
        size += len(section.text)
    return pages


def pager(urls: list[str], current: int, root: str, reach: int = 2) -> list[PagerLink]:
    """Page links around page `current` (1-based): the ends, the neighbours, gaps between."""
    links: list[PagerLink] = []
    n = len(urls)
    for i in range(1, n + 1):
        if i <= 2 or i > n - 2 or abs(i - current) <= reach:
            links.append(PagerLink(str(i), root + urls[i - 1], current=i == current))
        elif links and links[-1].url is not None:
            links.append(PagerLink("…", None))
    return links
