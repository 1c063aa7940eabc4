"""Cores: how many threads a sandboxed tree's numeric libraries start, and which cores a run
of a shared box may use.

Torch, OpenMP and BLAS size their thread pools to the machine's cores unless told otherwise,
whatever CPU quota the tree has. Two gradings on a 2-core box then run four busy threads on two
cores and take about ten times as long each, and a CFS quota makes it worse (threads stall at
every period's end). So every command a sandbox starts gets the thread variables below, sized
to the cores it may use: its CPU quota (`Limits.cpus`, rounded up) and the cores this process is
pinned to (a campaign pins each run process to its slot's share, `slot_cores`), whichever is
fewer. A caller's own value for one of them wins.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

THREAD_VARS = (
    "OMP_NUM_THREADS",  # OpenMP: torch's intra-op pool, libgomp-built BLAS
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)
THREADS_ENV = "ARI_SANDBOX_THREADS"
"""The operator's own thread count for every sandboxed tree (overrides the sizing below; the
shared-box benchmark sets it to the box's cores to measure what the sizing saves)."""
CORES_ENV = "ARI_CPU_CORES"
"""Comma-separated core ids a run process pins itself to (set by the campaign's local engine)."""


def usable_cores() -> list[int]:
    """The cores this process may run on (its affinity mask), in order."""
    return sorted(os.sched_getaffinity(0))


def thread_count(cpus: float | None) -> int:
    """Threads a tree should start: its quota rounded up, at most the cores it may use (or the
    operator's `THREADS_ENV`)."""
    forced = os.environ.get(THREADS_ENV, "")
    if forced.isdigit() and int(forced) > 0:
        return int(forced)
    cores = len(usable_cores())
    if cpus is None:
        return cores
    return max(1, min(cores, math.ceil(cpus - 1e-9)))


def thread_env(cpus: float | None) -> dict[str, str]:
    """The thread variables for a tree with a CPU quota of `cpus` cores (None: no quota)."""
    count = str(thread_count(cpus))
    return dict.fromkeys(THREAD_VARS, count)


def slot_cores(index: int, slots: int, cores: Sequence[int] | None = None) -> list[int] | None:
    """The cores of slot `index` of `slots` when the usable cores are split evenly between the
    slots (the first slots take one more when they do not divide); None when there are fewer
    cores than slots (then runs are not pinned: they share every core)."""
    cores = list(usable_cores() if cores is None else cores)
    if slots < 1 or not 0 <= index < slots or len(cores) < slots:
        return None
    size, extra = divmod(len(cores), slots)
    start = index * size + min(index, extra)
    return cores[start : start + size + (1 if index < extra else 0)]


def pin_from_env() -> list[int] | None:
    """Pin this process (and so everything it starts) to the cores named in `CORES_ENV`, if
    any of them is usable here; the cores pinned to, or None."""
    raw = os.environ.get(CORES_ENV, "")
    wanted = {int(c) for c in raw.split(",") if c.strip().isdigit()}
    cores = sorted(wanted & set(usable_cores()))
    if not cores:
        return None
    os.sched_setaffinity(0, cores)
    return cores
