"""The decision on provider failures: a spell of calls that failed at the provider is checked
by the harness's own probe call, straight to the provider, and only a failed probe makes the run
`invalid` (`problem` while the run goes, `final_problem` after the agent stopped).
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

from toolkit.agents.provider_api import is_failure, probe
from toolkit.agents.relay.accounting import _short
from toolkit.agents.relay.forward import MAX_ERROR_BODY, USER_AGENT, RelayForwarding
from toolkit.agents.relay.retry import retry_after_s

PROBE_TRIES = 3

PROBE_GAP_S = 2.0


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
class _Spell:
    """Calls failing at the provider with none answered in between."""

    since: float
    failures: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    last: str = ""


class RelayVerdict(RelayForwarding):
    """The layer of `ProviderRelay` that decides whether the provider failed."""

    kind: str
    model: str
    clock: Callable[[], float]
    stall_limit_s: float | None
    probe_wait_max_s: float
    probe_gap_s: float
    _spell: _Spell | None
    _checking: threading.Thread | None
    _verdict: str | None

    def probe_once(self, timeout_s: float | None = None) -> ProbeResult:
        """One minimal call of the harness's own, straight to the provider (never held, never
        retried); `timeout_s` bounds its connect and each read (default: the relay's)."""
        path, body, extra = probe(self.kind, self.model)
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "Host": self.upstream.netloc, **extra}
        headers["Accept-Encoding"] = "identity"
        headers["User-Agent"] = USER_AGENT
        headers[self.credential.header] = self.credential.prefix + self._key
        started = time.monotonic()
        result: ProbeResult
        try:
            conn, _ = self._connection(fresh=True, timeout_s=timeout_s)
            try:
                conn.request("POST", self._target(path, ""), body=data, headers=headers)
                answer = conn.getresponse()
                said = answer.read(MAX_ERROR_BODY)
            finally:
                conn.close()
            retry = retry_after_s(answer.getheader("retry-after"))
            failed = is_failure(answer.status)
            detail = self._error_detail(said) if failed else None
            result = ProbeResult(failed, answer.status, None, retry, detail)
        except (OSError, http.client.HTTPException, ssl.SSLError) as e:
            result = ProbeResult(True, None, f"unreachable: {type(e).__name__}: {_short(e)}")
        with self._lock:
            self.totals.probes += 1
        self.record(
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
        said = " ".join((said.replace(self._key, "[redacted]") if self._key else said).split())
        return _short(said, 120) if said else None

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
                if hold and self._open.is_set():
                    self._open.clear()
                    self.record({"kind": "hold", "why": "rate limited: the probe waits"})
            time.sleep(min(max(wait, self.probe_gap_s), self.probe_wait_max_s))
        return result

    def _spell_text(self, spell: _Spell) -> str:
        kinds = ", ".join(f"{k} x{n}" for k, n in spell.kinds.most_common(4))
        lasted = self.clock() - spell.since
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
            if self.clock() - spell.since <= self.stall_limit_s:
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
            self.record({"kind": "cleared", "why": f"the probe was answered after: {text}"})
            self._open.set()

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
        long = self.stall_limit_s is not None and self.clock() - spell.since > self.stall_limit_s
        if not (exited or long):
            return None
        text = self._spell_text(spell)
        failed = self._confirm(hold=False)
        if failed is None:
            self.record({"kind": "cleared", "why": f"the probe was answered after: {text}"})
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
