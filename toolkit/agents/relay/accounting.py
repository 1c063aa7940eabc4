"""The relay's books (`Accounting`): what it counted (`RelayTotals`), its log (`provider.jsonl`,
one line per call, metadata only), the notes it leaves in the harness's `agent.log`, and the
spend summary. The other parts tell it what happened; it decides nothing.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from toolkit.agents.provider_api import Tokens
from toolkit.agents.relay.budget import RelayLimits, Spend

LOG_FILE = "provider.jsonl"

MAX_LOG_LINES = 50_000  # then only counters: a flood of refused calls must not fill the disk


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def short(text: object, limit: int = 200) -> str:
    """`text` on one line, at most `limit` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


@dataclass
class RelayTotals:
    """What the relay counted: the run's model calls as the provider answered them."""

    calls: int = 0
    answered: int = 0
    failed: int = 0
    refused: int = 0
    bytes_up: int = 0
    bytes_down: int = 0
    with_usage: int = 0
    tokens: Tokens = field(default_factory=Tokens)
    probes: int = 0
    retries: int = 0
    """Sends of a call after its first (`retry`), all calls together."""
    retried_calls: int = 0
    """Calls sent more than once."""


class Accounting:
    """Counting, logging and notes, safe from any thread. `open()` starts the log file (a
    relay never started, as for the pre-flight probe, counts without one); `close()` ends it."""

    def __init__(
        self, log_path: Path | None = None, note: Callable[[str], None] | None = None
    ) -> None:
        self.totals = RelayTotals()
        self._log_path = log_path
        self._note = note
        self._lock = threading.Lock()
        self._log: IO[str] | None = None  # open between `open()` and `close()`
        self._log_lines = 0
        self._announced = False

    def open(self) -> None:
        if self._log_path is not None:
            self._log = self._log_path.open("a", encoding="utf-8")

    def close(self) -> None:
        with self._lock:
            if self._log is not None:
                self._log.close()
                self._log = None

    def record(self, entry: dict[str, object], force: bool = False) -> None:
        """One line of `provider.jsonl` (metadata only)."""
        line = json.dumps({"time": _now(), **entry}, sort_keys=True)
        with self._lock:
            if self._log is None or (self._log_lines >= MAX_LOG_LINES and not force):
                return
            self._log_lines += 1
            if self._log_lines == MAX_LOG_LINES and not force:
                line = json.dumps({"time": _now(), "kind": "log-full", "after": MAX_LOG_LINES})
            self._log.write(line + "\n")
            self._log.flush()

    def note(self, message: str) -> None:
        """One line for the harness's `agent.log` (when the harness gave a way to write it)."""
        if self._note is None:
            return
        try:
            self._note(f"provider relay: {message}")
        except Exception:  # a note the harness cannot take must not cost a call or the run
            self.record({"kind": "note-lost", "note": message[:500]})

    def announce(self, why: str) -> None:
        """Say once, in `provider.jsonl` and `agent.log`, that the budget is spent."""
        with self._lock:
            if self._announced:
                return
            self._announced = True
        self.record({"kind": "budget", "spent": why})
        self.note(f"{why}: further model calls are refused (the run stays valid)")

    # -- counting ------------------------------------------------------------------------

    def count_refused(self) -> None:
        with self._lock:
            self.totals.refused += 1

    def count_probe(self) -> None:
        with self._lock:
            self.totals.probes += 1

    def count_dropped(self, bytes_up: int, bytes_down: int) -> None:
        """A send whose answer was dropped before the call was sent again (`retry`)."""
        with self._lock:
            self.totals.bytes_up += bytes_up
            self.totals.bytes_down += bytes_down

    def count_call(
        self, entry: dict[str, object], tokens: Tokens | None, failure: str | None
    ) -> None:
        """One call passed on, as its log entry says (bytes, retries), with the provider's
        usage counts if it gave any."""
        retries = int(str(entry.get("retries", 0)))
        with self._lock:
            t = self.totals
            t.calls += 1
            t.retries += retries
            t.retried_calls += 1 if retries else 0
            t.bytes_up += int(str(entry["bytes_up"]))
            t.bytes_down += int(str(entry["bytes_down"]))
            if tokens is not None:
                t.with_usage += 1
                t.tokens.add(tokens)
            if failure is None:
                t.answered += 1
            else:
                t.failed += 1

    # -- the end -------------------------------------------------------------------------

    def summary(self, spend: Spend) -> dict[str, object]:
        """The log's last line: every counter, and the spend."""
        totals = self.totals
        return {
            "kind": "summary",
            "calls": totals.calls,
            "answered": totals.answered,
            "failed": totals.failed,
            "refused": totals.refused,
            "bytes_up": totals.bytes_up,
            "bytes_down": totals.bytes_down,
            "with_usage": totals.with_usage,
            "usage": totals.tokens.as_dict(),
            "probes": totals.probes,
            "retries": totals.retries,
            "retried_calls": totals.retried_calls,
            "budget_tokens": spend.tokens,
            "cost_usd": spend.cost_usd,
            "budget_spent": spend.spent is not None,
            "budget_refused": spend.refused,
        }

    def spend_summary(self, spend: Spend, limits: RelayLimits) -> str:
        """The spend in words, for `agent.log`."""
        tokens = f"{spend.tokens:,} tokens counted against the budget"
        tokens += f" of {limits.max_tokens_total:,}" if limits.max_tokens_total else " (no limit)"
        if spend.cost_usd is None:
            cost = "cost unknown (no prices, and the provider reported none)"
        else:
            cost = f"${spend.cost_usd:.4f}"
            cost += f" of ${limits.max_cost_usd:.2f}" if limits.max_cost_usd else " (no limit)"
        ended = (
            f"; budget spent, {spend.refused} call(s) refused ({spend.spent}); not a provider "
            "failure"
            if spend.spent
            else ""
        )
        t = self.totals
        retried = f" ({t.retries} retries for {t.retried_calls} of them)" if t.retries else ""
        return f"{t.calls} model call(s) passed on{retried}; {tokens}; {cost}{ended}"
