"""The relay's accounting: what it counted (`RelayTotals`), its log (`provider.jsonl`, one line
per call, metadata only), the notes it leaves in the harness's `agent.log`, and the spend summary.

The relay is one object (`front.ProviderRelay`) built in layers, one module each, each layer
using only those below it: accounting (here), forwarding to the provider (`forward`), the
decision on provider failures (`verdict`), passing answers back (`stream`), the HTTP front the
scaffold talks to (`front`). Each layer declares the attributes it reads; `ProviderRelay.__init__`
sets them all.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO

from toolkit.agents.provider_api import Tokens
from toolkit.agents.relay.budget import RelayLimits, Spend

LOG_FILE = "provider.jsonl"

MAX_LOG_LINES = 50_000  # then only counters: a flood of refused calls must not fill the disk


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _short(text: object, limit: int = 200) -> str:
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


class RelayAccounting:
    """The bottom layer of `ProviderRelay`: counting, logging, notes."""

    _lock: threading.Lock
    _log: IO[str] | None
    _log_lines: int
    _note: Callable[[str], None] | None
    _announced: bool
    totals: RelayTotals
    spend: Spend
    limits: RelayLimits

    def _announce(self, why: str) -> None:
        """Say once, in `provider.jsonl` and `agent.log`, that the budget is spent."""
        with self._lock:
            if self._announced:
                return
            self._announced = True
        self.record({"kind": "budget", "spent": why})
        self.note(f"{why}: further model calls are refused (the run stays valid)")

    def note(self, message: str) -> None:
        """One line for the harness's `agent.log` (when the harness gave a way to write it)."""
        if self._note is None:
            return
        try:
            self._note(f"provider relay: {message}")
        except Exception:  # a note the harness cannot take must not cost a call or the run
            self.record({"kind": "note-lost", "note": message[:500]})

    def spend_summary(self) -> str:
        spend, limits = self.spend, self.limits
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
