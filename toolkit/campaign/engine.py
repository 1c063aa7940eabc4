"""What the campaign driver needs from an engine (local slots or a Ray cluster).

An engine starts jobs and says when they are over; the driver decides what to run, claims
keys, counts attempts and writes nothing an engine could write twice. A `Finished` is the
engine's account of one job: a result (status + path, already in the results folder) or the
one-line reason there is none.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from toolkit.campaign.job import Job
from toolkit.results.model import RunStatus


@dataclass
class Running:
    """A job holding a slot now (for the progress view)."""

    job: Job
    slot: str  # "node/gpu0", "node/cpu1"
    started: float  # wall clock (time.time())


@dataclass
class Finished:
    """A job that is over, with its result or the reason it has none."""

    job: Job
    status: RunStatus | None
    result: Path | None
    error: str | None = None
    slot: str | None = None
    started: float | None = None  # the run process's own start and end (wall clock)
    finished: float | None = None
    freed: float | None = None  # when the engine saw the slot free (wall clock)


class Engine(Protocol):
    name: str

    def room(self) -> int:
        """How many more jobs may be started now."""
        ...

    def start(self, job: Job, claim_fd: int | None = None) -> None:
        """Start `job`; a run process on this machine inherits `claim_fd` (the key's claim)."""
        ...

    def wait(self, timeout: float) -> list[Finished]:
        """Jobs that ended since the last call; waits up to `timeout` for the first one."""
        ...

    def running(self) -> list[Running]: ...

    def slots(self) -> list[str]:
        """Every slot known now (for occupancy)."""
        ...

    def close(self) -> None:
        """Stop what is still running (each such run records itself as invalid)."""
        ...


def now() -> float:
    return time.time()
