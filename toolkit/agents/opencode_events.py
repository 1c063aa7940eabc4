"""Reading what opencode prints while it runs: JSON events on stdout, its log on stderr.

`opencode run --format json` prints one JSON object a line: `step_start`, `step_finish` (with
the step's tokens and cost), `tool_use`, `text`, `reasoning`, `error`. `--print-logs` puts its
log on stderr, where each failed model call shows as a `stream error` line before the scaffold
retries it. From these, `EventTally` keeps the usage (summed over `step_finish`), the session id
(for the export at the end), and what the scaffold says of provider failures (an `error` event,
failed calls in its log).

All of it comes from the controller, where the model's commands run as the scaffold's user and
can write into the scaffold's own output: so it is a claim, never evidence. A provider failure
is decided by the harness's relay (`relay/`); `claim()` only adds the scaffold's words to the
reason, and a forged `step_finish` only changes the scaffold-side usage, which the relay's own
counts replace wherever the provider reports usage.

Parsing is defensive: a line that is not JSON, an unknown event type or a missing field is
kept (the raw line is in `events.jsonl` anyway) and never stops the run.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from toolkit.results.model import Usage

# Error names that mean the model provider failed, not the model or the scaffold's own logic.
PROVIDER_ERRORS = ("APIError", "ProviderAuthError", "ProviderModelNotFoundError")
_LOG_ERROR = re.compile(r'message="stream error".*?error\.error="((?:[^"\\]|\\.)*)"')
ECHO_CHARS = 240


@dataclass
class _Sums:
    input: int = 0
    output: int = 0
    reasoning: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost: float = 0.0
    steps: int = 0


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _short(text: object, limit: int = ECHO_CHARS) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


@dataclass
class EventTally:
    """What the events and the log said so far (thread-safe: the two streams are read apart)."""

    clock: Callable[[], float] = time.monotonic
    session_id: str | None = None
    provider_error: str | None = None
    other_errors: list[str] = field(default_factory=list)
    unknown_types: set[str] = field(default_factory=set)
    _sums: _Sums = field(default_factory=_Sums)
    _failing_since: float | None = None
    _last_failure: str | None = None
    _failures: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # -- stdout: events -----------------------------------------------------------------------

    def event(self, line: str) -> str | None:
        """Take one stdout line; return a short account of it for the operator (or None)."""
        try:
            event = json.loads(line)
        except ValueError:
            return _short(line) if line.strip() else None
        if not isinstance(event, dict):
            return None
        kind = event.get("type")
        raw_part = event.get("part")
        part: dict[str, object] = raw_part if isinstance(raw_part, dict) else {}
        with self._lock:
            if self.session_id is None and isinstance(event.get("sessionID"), str):
                self.session_id = event["sessionID"]
            if kind == "step_finish":
                return self._step_finished(part)
            if kind == "error":
                return self._error(event.get("error"))
            if kind == "tool_use":
                return self._tool(part)
            if kind in ("text", "reasoning"):
                prefix = "thinking: " if kind == "reasoning" else ""
                return f"[opencode] {prefix}{_short(part.get('text', ''))}"
            if kind != "step_start":
                self.unknown_types.add(str(kind))
        return None

    def _step_finished(self, part: dict[str, object]) -> str | None:
        tokens = part.get("tokens") if isinstance(part.get("tokens"), dict) else {}
        assert isinstance(tokens, dict)
        cache = tokens.get("cache") if isinstance(tokens.get("cache"), dict) else {}
        assert isinstance(cache, dict)
        sums = self._sums
        sums.input += int(_number(tokens.get("input")))
        sums.output += int(_number(tokens.get("output")))
        sums.reasoning += int(_number(tokens.get("reasoning")))
        sums.cache_read += int(_number(cache.get("read")))
        sums.cache_write += int(_number(cache.get("write")))
        sums.cost += _number(part.get("cost"))
        sums.steps += 1
        self._failing_since = None  # the provider answered
        self._failures = 0
        return None

    def _tool(self, part: dict[str, object]) -> str:
        state = part.get("state") if isinstance(part.get("state"), dict) else {}
        assert isinstance(state, dict)
        status = state.get("status", "?")
        title = state.get("title") or state.get("input") or ""
        shown = f"[opencode] {part.get('tool', '?')}: {_short(title, 120)}"
        if status == "error":
            shown += f" -> error: {_short(state.get('error', ''), 120)}"
        return shown

    def _error(self, error: object) -> str:
        name, message = "UnknownError", _short(error)
        if isinstance(error, dict):
            name = str(error.get("name", name))
            data = error.get("data")
            if isinstance(data, dict):
                status = data.get("statusCode")
                message = _short(data.get("message", message), 200)
                if status is not None:
                    message = f"HTTP {status}: {message}"
        described = f"{name}: {message}"
        if name in PROVIDER_ERRORS:
            self.provider_error = described
        else:
            self.other_errors.append(described)
        return f"[opencode] error: {described}"

    # -- stderr: the scaffold's log -----------------------------------------------------------

    def log(self, line: str) -> str | None:
        """Take one stderr line; a failed model call starts (or continues) a failure spell."""
        found = _LOG_ERROR.search(line)
        if not found:
            return None
        with self._lock:
            if self._failing_since is None:
                self._failing_since = self.clock()
            self._failures += 1
            self._last_failure = found.group(1).replace('\\"', '"')
            return f"[opencode] model call failed ({self._failures} in a row): {found.group(1)}"

    # -- what the harness asks ----------------------------------------------------------------

    def claim(self) -> str | None:
        """What the scaffold says went wrong with the provider (its give-up error, else its
        current spell of failed calls), for the operator; None if nothing."""
        with self._lock:
            if self.provider_error:
                return self.provider_error
            if self._failing_since is None:
                return None
            lasted = self.clock() - self._failing_since
            return (
                f"{self._failures} model call(s) failed in a row over {lasted:.0f}s, "
                f"last: {self._last_failure}"
            )

    def usage(self) -> Usage:
        """Tokens summed over the steps; cost only when the scaffold priced any of them."""
        with self._lock:
            sums = self._sums
            if sums.steps == 0:
                return Usage()
            return Usage(
                input_tokens=sums.input,
                output_tokens=sums.output,
                reasoning_tokens=sums.reasoning,
                cache_read_tokens=sums.cache_read,
                cache_write_tokens=sums.cache_write,
                cost_usd=round(sums.cost, 6) if sums.cost > 0 else None,
            )
