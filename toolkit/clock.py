"""The run's clock: one monotonic deadline that every part of the harness reads.

The agent never owns the clock. The harness starts it when the agent starts, the runner service
asks it before accepting compute (per-call limit, reserved window), and the orchestrator kills
everything when it runs out. A monotonic clock is used so that a wall-clock jump (NTP, an agent
with root changing the date on the local backend) cannot stretch or shrink a run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime


@dataclass
class Clock:
    """Budget accounting for one run.

    `budget_s` is the whole run; `reserved_s` is the final window in which new compute is
    refused (submit and promote still work); `per_call_limit_s` caps one compute call.
    """

    budget_s: float
    reserved_s: float
    per_call_limit_s: float
    started_mono: float = field(default_factory=time.monotonic)
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    def __post_init__(self) -> None:
        if self.budget_s <= 0:
            raise ValueError(f"budget must be positive, got {self.budget_s}")
        if not 0 <= self.reserved_s < self.budget_s:
            raise ValueError(f"reserved window {self.reserved_s}s must be below the budget")

    def elapsed(self) -> float:
        """Seconds since the run started."""
        return time.monotonic() - self.started_mono

    def time_left(self) -> float:
        """Seconds until the deadline (never negative)."""
        return max(0.0, self.budget_s - self.elapsed())

    def compute_left(self) -> float:
        """Seconds until the reserved window opens (never negative)."""
        return max(0.0, self.time_left() - self.reserved_s)

    def in_reserved_window(self) -> bool:
        """Whether new compute is refused now."""
        return self.compute_left() <= 0

    def expired(self) -> bool:
        return self.time_left() <= 0

    def call_limit(self) -> float:
        """How long a compute call started now may run: the per-call limit, cut at the deadline.

        A call that is already running when the reserved window opens is not cut there: the
        protocol only refuses *new* compute in that window, and planning around it is part of
        what the benchmark measures.
        """
        return min(self.per_call_limit_s, self.time_left())

    def header(self) -> str:
        """The line every runner reply starts with."""
        left = round(self.time_left())
        note = " (reserved window: submit/promote only)" if self.in_reserved_window() else ""
        return f"[runner] time left: {format_duration(left)} ({left} s){note}"


def format_duration(seconds: float) -> str:
    """`3725` -> `1h 02m 05s`; short and unambiguous for agents and people."""
    s = max(0, round(seconds))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    if h:
        return f"{h}h {m:02d}m {sec:02d}s"
    if m:
        return f"{m}m {sec:02d}s"
    return f"{sec}s"
