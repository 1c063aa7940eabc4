"""Which `runner` calls get an audit entry of their own, and which are only counted.

A call costs the agent almost nothing: one command wrote 44,129 made-up request names into the
requests FIFO in 102 s, and each became an entry (19 MB of audit log). The log stays bounded:

- the first `MALFORMED_LOGGED` malformed requests of a run (no call folder, a name already
  being served, an unreadable argument list) get an entry each; later ones are counted; the
  same for requests still unread when the run ends (a flood sent just before the deadline);
- a run's log holds at most `MAX_ENTRIES` call entries; calls past it are refused before they
  run (the agent is told) and counted;
- an entry the full results volume refused (`AppendError`, ENOSPC) is counted as lost.

Counts go into the log as summary entries, `{"summary": KIND, "count": N, "first_s": ...,
"last_s": ..., "note": ...}`, one for every `SUMMARY_EVERY` calls of a kind and one for what
is left when the run ends (`flush`), so the log says how many calls it does not list one by one,
and when they came, however the run ends. Nothing here decides what a call may do: the service
serves, this only records.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Literal

from toolkit.results.chain import ChainedLog

MALFORMED_LOGGED = 100
MAX_ENTRIES = 100_000
"""Call entries a run's audit log may hold (a call every 36 ms for an hour); each takes well
under 1 KB plus its arguments (bounded on their own: `ArgsBudget`)."""
SUMMARY_EVERY = 1000

Kind = Literal["malformed", "unread", "over-cap", "lost"]
NOTES: dict[Kind, str] = {
    "malformed": f"malformed requests after the first {MALFORMED_LOGGED}: counted, not listed",
    "unread": f"requests unread when the run ended, after the first {MALFORMED_LOGGED}: counted",
    "over-cap": f"calls refused once the log held {MAX_ENTRIES:,} call entries: counted",
    "lost": "entries the full results volume could not take: counted",
}


@dataclass
class _Pending:
    count: int = 0
    first_s: float = 0.0
    last_s: float = 0.0


class AuditGate:
    """The audit log of one run, with its bounds (see the module docstring)."""

    def __init__(
        self,
        log: ChainedLog,
        *,
        malformed_logged: int = MALFORMED_LOGGED,
        max_entries: int = MAX_ENTRIES,
        summary_every: int = SUMMARY_EVERY,
    ) -> None:
        self.log = log
        self.malformed_logged = malformed_logged
        self.max_entries = max_entries
        self.summary_every = summary_every
        self.calls_logged = 0
        self.malformed = 0
        self.unread = 0
        self.counted: dict[Kind, int] = {"malformed": 0, "unread": 0, "over-cap": 0, "lost": 0}
        self._pending: dict[Kind, _Pending] = {}
        self._lock = threading.Lock()

    def full(self) -> bool:
        """The log holds its most call entries: new calls are refused (and counted)."""
        with self._lock:
            return self.calls_logged >= self.max_entries

    def record(
        self,
        entry: dict[str, Any],
        *,
        malformed: bool,
        over_cap: bool,
        at_s: float,
        unread: bool = False,
    ) -> None:
        """Log one call's entry, or count it. Raises what the log raises (`AppendError`)."""
        with self._lock:
            self.malformed += malformed
            self.unread += unread
            kind: Kind | None = None
            if over_cap:
                kind = "over-cap"
            elif malformed and self.malformed > self.malformed_logged:
                kind = "malformed"
            elif unread and self.unread > self.malformed_logged:
                kind = "unread"
            if kind is None:
                self.calls_logged += 1
        if kind is None:
            try:
                self.log.append(entry)
            except BaseException:
                with self._lock:
                    self.calls_logged -= 1
                raise
            return
        self._count(kind, at_s)

    def lost(self, at_s: float) -> None:
        """An entry the log could not take (the volume is full): counted."""
        self._count("lost", at_s, write=False)  # written by `flush`, once there is room

    def _count(self, kind: Kind, at_s: float, write: bool = True) -> None:
        with self._lock:
            self.counted[kind] += 1
            pending = self._pending.setdefault(kind, _Pending(first_s=at_s))
            pending.count += 1
            pending.last_s = at_s
            due = write and pending.count >= self.summary_every
            if due:
                del self._pending[kind]
        if due:
            try:
                self._write(kind, pending)
            except OSError:  # no room now (a full volume): written by `flush`, merged
                with self._lock:
                    again = self._pending.setdefault(kind, _Pending(first_s=pending.first_s))
                    again.count += pending.count
                    again.first_s = min(again.first_s, pending.first_s)
                    again.last_s = max(again.last_s, pending.last_s)

    def _write(self, kind: Kind, pending: _Pending) -> None:
        self.log.append(
            {
                "summary": kind,
                "count": pending.count,
                "first_s": round(pending.first_s, 3),
                "last_s": round(pending.last_s, 3),
                "note": NOTES[kind],
            }
        )

    def flush(self) -> None:
        """A summary entry for every count not yet written (the run is over)."""
        with self._lock:
            pending, self._pending = self._pending, {}
        for kind in sorted(pending):
            self._write(kind, pending[kind])
