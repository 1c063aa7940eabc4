"""Timing helpers shared by the benchmark scripts (run as `python benchmarks/bench_*.py`)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_s(action: Callable[[], object], runs: int) -> float:
    """Median wall-clock seconds of `action` over `runs` calls, after one warm-up call."""
    action()  # warm-up (imports, host probe, page cache)
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)
