"""When the relay sends a model call again, and how long it waits first.

A provider that is busy for a moment (HTTP 429, 500, 502, 503, 504, 529; a connection reset,
refused or timed out before any answer) should not cost the run a failed step. So the relay
sends such a call again, a bounded number of times, waiting longer each time (exponential
backoff with jitter, so that the runs of a campaign do not come back in step), and never less
than the provider's own `Retry-After` (capped: a provider cannot park a run for an hour).

Only before any byte of the answer reached the scaffold: once the relay has passed on the head
of an answer, a stream that breaks is a failed call (sending it again would give the scaffold
two answers to one question). A call that still fails after its retries is a failed call as
before: it starts or continues the relay's failure spell.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504, 529})
"""Statuses that say "not now" rather than "never": worth sending the same call again."""


def _jitter() -> float:
    return random.random()


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a failing model call is sent again."""

    retries: int = 3
    """Sends after the first, at most (0: never send again)."""
    base_s: float = 1.0
    """The first wait; each further one doubles (before jitter)."""
    max_wait_s: float = 30.0
    """The longest single wait, a provider's `Retry-After` included."""
    window_s: float = 120.0
    """No retry starts later than this after the call was first sent (a call that timed out
    after minutes is not sent again)."""
    jitter: Callable[[], float] = field(default=_jitter, compare=False, repr=False)
    """A number in [0, 1) (tests give a fixed one)."""

    def __post_init__(self) -> None:
        if self.retries < 0 or self.base_s < 0 or self.max_wait_s < 0 or self.window_s < 0:
            raise ValueError("a retry policy's counts and times cannot be negative")

    def wait_s(self, retry: int, retry_after_s: float | None) -> float:
        """The wait before retry number `retry` (1 for the first): half the backoff plus a
        random share of the other half, at least the provider's `Retry-After`, at most
        `max_wait_s`."""
        backoff = self.base_s * 2.0 ** (retry - 1)
        wait = backoff / 2 + float(self.jitter()) * backoff / 2
        if retry_after_s is not None:
            wait = max(wait, retry_after_s)
        return min(wait, self.max_wait_s)

    def allows(self, retry: int, elapsed_s: float, wait_s: float) -> bool:
        """Whether retry number `retry` may be sent, `elapsed_s` after the call was first
        sent, after waiting `wait_s`."""
        return retry <= self.retries and elapsed_s + wait_s <= self.window_s


def retry_after_s(seconds: str | None, milliseconds: str | None = None) -> float | None:
    """The provider's wish, from `Retry-After` (seconds; a date is not read) or the
    `retry-after-ms` some providers send; None when neither parses."""
    for value, scale in ((milliseconds, 1000.0), (seconds, 1.0)):
        if not value:
            continue
        try:
            parsed = float(value.strip()[:40]) / scale
        except ValueError:
            continue
        if parsed == parsed and parsed >= 0:  # not NaN
            return min(parsed, 24 * 3600.0)
    return None
