"""The decision on provider failures (`Verdict`): it hears how each call ended, and a spell of
calls that failed at the provider is checked by the harness's own probe call, straight to the
provider; only a failed probe makes the run `invalid` (`problem` while the run goes,
`final_problem` after the agent stopped).

It talks to the provider through a `Prober` (the forwarder: the key stays there), writes to
`ProbeBooks` (the accounting), and holds the controller's calls (`forward.Hold`) while it
waits out a rate limit: each can be a fake in a test.
"""

from __future__ import annotations

import http.client
import json
import ssl
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from toolkit.agents.provider_api import is_failure, probe
from toolkit.agents.relay.accounting import short
from toolkit.agents.relay.forward import Exchange, Hold
from toolkit.agents.relay.retry import retry_after_s

PROBE_TRIES = 3

PROBE_GAP_S = 2.0


class Prober(Protocol):
    """How the verdict reaches the provider (`forward.Forwarder`)."""

    def exchange(
        self, path: str, body: bytes, extra: dict[str, str], timeout_s: float | None = None
    ) -> Exchange: ...

    def redact_text(self, text: str) -> str: ...


class ProbeBooks(Protocol):
    """What the verdict tells the books (`accounting.Accounting`)."""

    def record(self, entry: dict[str, object], force: bool = False) -> None: ...

    def count_probe(self) -> None: ...


@dataclass
class ProbeResult:
    failed: bool
    status: int | None
    error: str | None
    retry_after_s: float | None = None
    detail: str | None = None
    """The provider's own short word on a failed probe (its error message), key blanked."""

    def describe(self) -> str:
        return f"HTTP {self.status}" if self.error is None else str(self.error)


@dataclass
class Spell:
    """Calls failing at the provider with none answered in between."""

    since: float
    failures: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    last: str = ""


class Verdict:
    """Whether the provider failed the run, from the calls' endings and its own probes."""

    def __init__(
        self,
        *,
        kind: str,
        model: str,
        prober: Prober,
        books: ProbeBooks,
        hold: Hold,
        clock: Callable[[], float] = time.monotonic,
        stall_limit_s: float | None = None,
        probe_wait_max_s: float = 60.0,
        probe_gap_s: float = PROBE_GAP_S,
    ) -> None:
        self.kind = kind
        self.model = model
        self.stall_limit_s = stall_limit_s
        self.probe_wait_max_s = probe_wait_max_s
        self.probe_gap_s = probe_gap_s
        self._prober = prober
        self._books = books
        self._hold = hold
        self._clock = clock
        self._lock = threading.Lock()
        self._spell: Spell | None = None  # failures since the last answer, if any
        self._checking: threading.Thread | None = None  # a probe under way, if any
        self._verdict: str | None = None  # the confirmed failure, once there is one

    def heard(self, failure: str | None) -> None:
        """A call ended: answered (`failure` None) ends a spell, a failure starts or
        continues one (its kind: the failure's text up to its first colon)."""
        with self._lock:
            if failure is None:
                self._spell = None
                return
            if self._spell is None:
                self._spell = Spell(since=self._clock())
            spell = self._spell
            spell.failures += 1
            spell.kinds[failure.split(":", 1)[0]] += 1
            spell.last = failure

    def probe_once(self, timeout_s: float | None = None) -> ProbeResult:
        """One minimal call of the harness's own, straight to the provider (never held, never
        retried); `timeout_s` bounds its connect and each read (default: the relay's)."""
        path, body, extra = probe(self.kind, self.model)
        started = time.monotonic()
        result: ProbeResult
        try:
            answer = self._prober.exchange(path, json.dumps(body).encode(), extra, timeout_s)
            failed = is_failure(answer.status)
            detail = self._error_detail(answer.body) if failed else None
            retry = retry_after_s(answer.retry_after)
            result = ProbeResult(failed, answer.status, None, retry, detail)
        except (OSError, http.client.HTTPException, ssl.SSLError) as e:
            result = ProbeResult(True, None, f"unreachable: {type(e).__name__}: {short(e)}")
        self._books.count_probe()
        self._books.record(
            {
                "kind": "probe",
                "method": "POST",
                "path": path,
                "status": result.status,
                "error": result.error,
                "outcome": "provider-failure" if result.failed else "answered",
                "duration_s": round(time.monotonic() - started, 4),
            }
        )
        return result

    def _error_detail(self, data: bytes) -> str | None:
        """The message of a provider's error answer, short, with the key blanked."""
        text = data.decode("utf-8", errors="replace")
        try:
            parsed: object = json.loads(text)
        except ValueError:
            parsed = text
        for step in ("error", "message"):  # {"error": {"message": ...}}, {"message": ...}
            if isinstance(parsed, dict) and step in parsed:
                parsed = parsed[step]
        if isinstance(parsed, dict):
            parsed = parsed.get("message", json.dumps(parsed))
        said = "".join(c if c.isprintable() else " " for c in str(parsed))  # no escapes
        said = " ".join(self._prober.redact_text(said).split())
        return short(said, 120) if said else None

    def _confirm(self, hold: bool) -> ProbeResult | None:
        """Ask the provider ourselves, up to `PROBE_TRIES` times; None: it works. On a rate
        limit the controller's calls are held meanwhile (`hold`), so that a model spending the
        limit itself cannot make the probe fail."""
        result: ProbeResult | None = None
        for attempt in range(PROBE_TRIES):
            result = self.probe_once()
            if not result.failed:
                return None
            if attempt == PROBE_TRIES - 1:
                break
            wait = self.probe_gap_s
            if result.status == 429:
                wait = result.retry_after_s or self.probe_wait_max_s / 2
                if hold and self._hold.hold():
                    self._books.record({"kind": "hold", "why": "rate limited: the probe waits"})
            time.sleep(min(max(wait, self.probe_gap_s), self.probe_wait_max_s))
        return result

    def _spell_text(self, spell: Spell) -> str:
        kinds = ", ".join(f"{k} x{n}" for k, n in spell.kinds.most_common(4))
        lasted = self._clock() - spell.since
        return (
            f"{spell.failures} model call(s) in a row failed at the provider over {lasted:.0f}s "
            f"({kinds}; last: {spell.last})"
        )

    def problem(self) -> str | None:
        """While the run goes: the confirmed provider failure, if any. A spell longer than the
        stall limit starts a check in the background (the caller polls)."""
        with self._lock:
            if self._verdict or self._checking is not None:
                return self._verdict
            spell = self._spell
            if spell is None or self.stall_limit_s is None:
                return None
            if self._clock() - spell.since <= self.stall_limit_s:
                return None
            thread = threading.Thread(target=self._check, args=(True,), daemon=True)
            self._checking = thread
        thread.start()
        return None

    def _check(self, hold: bool) -> None:
        with self._lock:
            spell = self._spell
        text = self._spell_text(spell) if spell else "calls failed at the provider"
        failed = self._confirm(hold)
        with self._lock:
            self._checking = None
            if failed is not None:
                self._verdict = (
                    f"the model provider failed: {text}; the harness's own probe call failed "
                    f"too ({failed.describe()}): infrastructure, rerun"
                )
            elif self._spell is spell:
                self._spell = None  # the provider works: those failures were the calls' own
        if failed is None:
            self._books.record({"kind": "cleared", "why": f"the probe was answered after: {text}"})
            self._hold.release()

    def final_problem(self, exited: bool) -> str | None:
        """After the agent stopped: the confirmed provider failure, if any. A scaffold that
        exited during a spell, or a spell past the limit, is checked now (nothing of the
        controller is left to interfere)."""
        thread = self._checking
        if thread is not None:
            thread.join(timeout=self.probe_wait_max_s * PROBE_TRIES + 120)
        with self._lock:
            if self._verdict:
                return self._verdict
            spell = self._spell
        if spell is None:
            return None
        long = self.stall_limit_s is not None and self._clock() - spell.since > self.stall_limit_s
        if not (exited or long):
            return None
        text = self._spell_text(spell)
        failed = self._confirm(hold=False)
        if failed is None:
            self._books.record({"kind": "cleared", "why": f"the probe was answered after: {text}"})
            return None
        lead = (
            "the scaffold stopped while the model provider was failing"
            if exited
            else ("the model provider failed")
        )
        return (
            f"{lead}: {text}; the harness's own probe call failed too ({failed.describe()}): "
            "infrastructure, rerun"
        )
