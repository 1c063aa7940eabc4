"""What a run is doing right now, for `toolkit view`: `live.json` in its harness folder.

The audit log has a runner call only once it ends, and the harness log does not say that the
final grading is under way; a live view built from those alone shows an empty bar for a run's
first minute and "running" while it grades. The harness writes this small file (atomically, in
its own folder, which no sandbox sees) whenever what it holds changes: the step the run is in,
the runner calls in flight (start time and the first arguments), and the files that get the
agent's console. Nothing reads it to decide anything: it is a picture, and a reader treats
every field as untrusted text (the arguments are the agent's).

The step it shows is the run's `Timeline`: the steps of the run so far, each with when it
began (an interruption's reason names the last; the hidden grading's start is the result's
`finished_at`).
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

LIVE_FILE = "live.json"
ARGV_SHOWN = 8  # arguments of a call in flight kept for the picture
ARG_CHARS = 200  # characters kept of each


@dataclass(frozen=True)
class Step:
    name: str
    """What the run is doing, in words ("the agent's session")."""
    began: datetime
    hidden: bool = False
    """A hidden grading: from its start nothing published tells how long it took."""


class Timeline:
    """The steps of a run in progress, in order (append-only): the one it is in, for the live
    view and for an interruption's reason, and when its hidden grading began."""

    def __init__(self) -> None:
        self._steps = [Step("set-up", datetime.now(UTC))]

    def enter(self, name: str, *, hidden: bool = False) -> datetime:
        """The run is now doing `name`; returns when that began."""
        step = Step(name, datetime.now(UTC), hidden)
        self._steps.append(step)
        return step.began

    @property
    def current(self) -> str:
        return self._steps[-1].name

    def hidden_since(self) -> datetime | None:
        """When the hidden grading began (the published end of the run); None before it."""
        return next((s.began for s in self._steps if s.hidden), None)


class LiveFile:
    """Writes `harness/live.json` when its content changes (cheap to call every tick)."""

    def __init__(self, harness: Path, console: tuple[str, ...] = ()) -> None:
        self.path = harness / LIVE_FILE
        self.console = sorted(set(console))
        self._last: str | None = None

    def update(
        self, step: str, calls: list[tuple[float, list[str]]], session_s: float | None = None
    ) -> None:
        """Record `step`, the calls in flight as (start second, argv) and, once the agent's
        session is over, how long it lasted (`session_s`: the clock the result reports as
        used, not the time since the harness started); never raises (the picture must not
        stop the run)."""
        data: dict[str, Any] = {
            "step": step,
            "grading": step.startswith("the final grading"),
            "session_s": None if session_s is None else round(session_s, 1),
            "calls": [
                {"start_s": round(start, 1), "argv": [a[:ARG_CHARS] for a in argv[:ARGV_SHOWN]]}
                for start, argv in calls
            ],
            "console": self.console,
        }
        text = json.dumps(data, ensure_ascii=True)
        if text == self._last:
            return
        tmp = self.path.with_name(f".{LIVE_FILE}.tmp")
        with contextlib.suppress(OSError):
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, self.path)
            self._last = text


def read_live(harness: Path) -> dict[str, Any]:
    """The run's live.json, or {} when there is none (or it cannot be read)."""
    with contextlib.suppress(OSError, ValueError):
        data = json.loads((harness / LIVE_FILE).read_text(encoding="utf-8"))
        if isinstance(data, dict):
            return data
    return {}
