"""The run's spend limit, kept by the relay: tokens, and cost where it can be priced.

A run may spend at most `max_tokens_total` tokens (every part the provider counts: input,
output, reasoning, cache reads and writes) and `max_cost_usd` dollars on model calls. The
limits come from the track, and a campaign or `toolkit run` may set others (`RelayLimits`).

The relay asks `Spend.admit` before it passes a call on and tells `Spend.settle` what the
provider said the call used. Each admitted call holds a reservation of what it may cost: its
output cap, and for its input one token per byte of the body the provider gets (no tokenizer
makes more tokens than UTF-8 bytes) plus the most the provider has billed beyond a body's
bytes so far (a hidden system prompt, tool definitions it expands; `overhead`). A call is let
through only while what was counted so far, plus every reservation in flight, plus its own
input, stays under the limit. Until one call has been answered the overhead is unknown, so
calls wait and go one at a time (`FIRST_CALL_WAIT_S`). Hence, as long as the provider bills no
call more input than its body's bytes plus the overhead it showed before, the run's spend ends
at most one call's output cap past the limit, however many calls are sent at once (and the
relay takes at most `relay.MAX_CONNECTIONS` at once).
Once a call is turned away the budget is spent for good: every later call gets the same error
from the relay, in the provider's own format ("the run's token budget is spent"), and none
reaches the provider. That is the run's own doing, never a provider failure: the run stays
valid.

Cost: the providers file's prices (USD per million tokens by part) times the provider's
counts; without prices, the cost the provider reports in its usage, where it reports one
(OpenRouter does); else the cost is unknown and only the token limit holds. An answered call
whose answer carried no usage counts one token per 4 bytes sent and received (and its output
cap when the caller hung up before the answer ended).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from toolkit.agents.provider_api import Tokens
from toolkit.tracks.model import Track

DEFAULT_MAX_OUTPUT_TOKENS = 32_000
BYTES_PER_TOKEN = 4
"""What an answer without usage is counted at: one token per this many bytes moved."""
PROMPT_TOKENS_PER_BYTE = 1
"""What a call's input is reserved at, per byte of its body: a ceiling for any tokenizer."""
FIRST_CALL_WAIT_S = 600.0
"""How long a call waits for the first one in flight to be answered (and show the provider's
overhead) before it goes anyway."""


@dataclass(frozen=True)
class RelayLimits:
    """What the relay lets one run have from the provider."""

    max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS
    """The most output one call may ask for (each limit field is capped to it)."""
    max_tokens_total: int | None = None
    """Tokens of every part the run's calls may use in all; None: no limit."""
    max_cost_usd: float | None = None
    """USD the run's calls may cost in all, where they can be priced; None: no limit."""

    def __post_init__(self) -> None:
        if self.max_output_tokens < 1:
            raise ValueError("max_output_tokens must be at least 1")
        if self.max_tokens_total is not None and self.max_tokens_total < 1:
            raise ValueError("max_tokens_total must be at least 1")
        if self.max_cost_usd is not None and not self.max_cost_usd > 0:
            raise ValueError("max_cost_usd must be more than 0")


def limits_for(
    track: Track, max_tokens_total: int | None = None, max_cost_usd: float | None = None
) -> RelayLimits:
    """The track's limits, with a run's own budget (a campaign's, or `toolkit run`'s flags)
    where it gives one."""
    return RelayLimits(
        max_output_tokens=track.max_output_tokens,
        max_tokens_total=max_tokens_total or track.max_tokens_total,
        max_cost_usd=max_cost_usd or track.max_cost_usd,
    )


def price(cost: dict[str, float], tokens: Tokens) -> float:
    """USD from per-million prices by part (reasoning is billed as output)."""
    total = tokens.input * cost.get("input", 0.0)
    total += (tokens.output + tokens.reasoning) * cost.get("output", 0.0)
    total += tokens.cache_read * cost.get("cache_read", 0.0)
    total += tokens.cache_write * cost.get("cache_write", 0.0)
    return round(total / 1e6, 6)


def total(tokens: Tokens) -> int:
    return tokens.input + tokens.output + tokens.reasoning + tokens.cache_read + tokens.cache_write


@dataclass
class Reservation:
    """What one admitted call may still add: its output cap, in tokens and in dollars."""

    tokens: int
    cost_usd: float
    prompt: int = 0
    """The part of `tokens` held for the call's input."""
    body_bytes: int = 0
    """The body's size: what the provider billed beyond it is its overhead."""
    settled: bool = False


class Spend:
    """The run's spend so far against its `RelayLimits` (thread-safe)."""

    def __init__(self, limits: RelayLimits, prices: dict[str, float] | None = None) -> None:
        self.limits = limits
        self.prices = dict(prices or {})
        self.tokens = 0
        self.cost_usd: float | None = None
        self.unpriced_calls = 0  # answered calls whose cost could not be known
        self.refused = 0
        self.spent: str | None = None  # why the budget is spent, once it is
        self.overhead: int | None = None
        """The most input the provider billed a call beyond its body's bytes; None: no call
        was answered yet."""
        self.rate: float | None = None
        """Without prices: the dearest USD per token the provider has reported for a call (what
        a call's reservation is priced at); None: none reported yet."""
        self._held_tokens = 0
        self._held_cost = 0.0
        self._in_flight = 0
        self._lock = threading.Condition()

    @property
    def in_flight(self) -> int:
        """Calls admitted and not yet settled."""
        with self._lock:
            return self._in_flight

    def _over(self, in_flight: bool, prompt: int = 0, prompt_cost: float = 0.0) -> str | None:
        """Why the budget is spent by what was counted (and, `in_flight`, what the calls in
        flight may still add, and a new call's input); None while it is not."""
        limits = self.limits
        held_tokens = self._held_tokens + prompt if in_flight else 0
        held_cost = self._held_cost + prompt_cost if in_flight else 0.0
        promised = " and promised to calls in flight" if in_flight else ""
        used = self.tokens + held_tokens
        if limits.max_tokens_total is not None and used >= limits.max_tokens_total:
            return (
                f"the run's token budget is spent ({used:,} of {limits.max_tokens_total:,} "
                f"tokens used{promised})"
            )
        cost = None if self.cost_usd is None else self.cost_usd + held_cost
        if limits.max_cost_usd is not None and cost is not None and cost >= limits.max_cost_usd:
            return (
                f"the run's cost budget is spent (${cost:.4f} of ${limits.max_cost_usd:.2f} "
                f"used{promised})"
            )
        return None

    def _usd_per_token(self, kind: str) -> float:
        """What a reserved token of `kind` ("input", "output") is priced at: the price table's,
        else the dearest rate the provider reported (0 until it reported one: the first call
        goes alone, and is counted at what it cost)."""
        if self.prices:
            return self.prices.get(kind, 0.0) / 1e6
        return self.rate or 0.0

    def admit(
        self, output_cap: int, body_bytes: int = 0, wait_s: float = FIRST_CALL_WAIT_S
    ) -> tuple[Reservation | None, str | None]:
        """(the call's reservation, None) when it may go; (None, why) once the budget is spent.
        A call holds its output cap and its input (one token per byte of its body, plus the
        provider's overhead) until it is settled; its input is weighed against what is left,
        its output cap is not (so the spend ends at most one output cap past the limit).
        While no call was answered yet, a call waits (up to `wait_s`) for the one in flight."""
        with self._lock:
            deadline = time.monotonic() + wait_s
            while self.overhead is None and self._in_flight and self.spent is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._lock.wait(left)
            prompt = body_bytes * PROMPT_TOKENS_PER_BYTE + (self.overhead or 0)
            prompt_cost = prompt * self._usd_per_token("input")
            if self.spent is None:
                self.spent = self._over(in_flight=True, prompt=prompt, prompt_cost=prompt_cost)
            if self.spent is not None:
                self.refused += 1
                return None, self.spent
            cost = output_cap * self._usd_per_token("output") + prompt_cost
            held = Reservation(output_cap + prompt, cost, prompt, body_bytes)
            self._held_tokens += held.tokens
            self._held_cost += held.cost_usd
            self._in_flight += 1
            return held, None

    def settle(
        self,
        held: Reservation,
        tokens: Tokens | None,
        reported_cost: float | None,
        answered: bool,
        bytes_moved: int,
        cut_short: bool = False,
    ) -> str | None:
        """Count one call that is over; the reason the budget is now spent, the first time.
        A call answered without usage counts one token per 4 bytes moved, and its whole
        output cap too when the caller left before the answer ended (the provider may have
        gone on)."""
        with self._lock:
            if held.settled:
                return None
            held.settled = True
            self._held_tokens -= held.tokens
            self._held_cost -= held.cost_usd
            self._in_flight -= 1
            if tokens is not None:
                self.tokens += total(tokens)
                billed = tokens.input + tokens.cache_read + tokens.cache_write
                self.overhead = max(self.overhead or 0, billed - held.body_bytes)
            elif answered:
                self.tokens += bytes_moved // BYTES_PER_TOKEN
                if cut_short:
                    self.tokens += held.tokens - held.prompt
                self.overhead = self.overhead or 0  # nothing learned; calls need not wait
            self._lock.notify_all()
            cost: float | None = None
            if self.prices and tokens is not None:
                cost = price(self.prices, tokens)
            elif reported_cost is not None:
                cost = reported_cost
                if tokens is not None and total(tokens) > 0:
                    self.rate = max(self.rate or 0.0, reported_cost / total(tokens))
            if cost is not None:
                self.cost_usd = round((self.cost_usd or 0.0) + cost, 6)
            elif answered:
                self.unpriced_calls += 1
            if self.spent is None:
                self.spent = self._over(in_flight=False)
                return self.spent
            return None
