"""How a campaign shows itself: a live rich view on a terminal, plain lines otherwise.

The live view: runs done / running / queued / invalid, one line per slot (GPU or CPU slot:
which run holds it, for how long, how much of its budget is left), and the events (a run
started, ended, was retried) scrolling above. Piped or in a log (`ray job submit`), the same
events come as plain timestamped lines, with a status line at most every `PLAIN_STATUS_S`.
"""

from __future__ import annotations

import time
from types import TracebackType

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from toolkit.campaign.driver import Progress, View

PLAIN_STATUS_S = 30.0


def _clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def summary(progress: Progress) -> str:
    parts = [
        f"done {progress.done}/{progress.total}",
        f"running {len(progress.running)}",
        f"queued {progress.queued}",
        f"invalid {progress.invalid}",
    ]
    if progress.gave_up:
        parts.append(f"gave up {len(progress.gave_up)}")
    if progress.elsewhere:
        parts.append(f"held by another campaign {len(progress.elsewhere)}")
    if progress.spend:
        parts.append(progress.spend)
    return " · ".join(parts)


def slots_table(progress: Progress, now: float) -> Table:
    table = Table(header_style="bold", box=None, pad_edge=False)
    for column in ("slot", "run", "try", "elapsed", "left"):
        table.add_column(column, justify="right" if column in ("elapsed", "left") else "left")
    by_slot = {r.slot: r for r in progress.running}
    names = progress.slots or sorted(by_slot)
    for name in names:
        run = by_slot.get(name)
        if run is None:
            table.add_row(name, Text("idle", style="dim"), "", "", "")
            continue
        elapsed = now - run.started
        left = progress.budget_s - elapsed
        table.add_row(
            name,
            run.job.key.label(),
            str(run.job.attempt),
            _clock(elapsed),
            _clock(left) if left > 0 else "grading",
        )
    return table


class LiveView(View):
    """The rich view, for a terminal."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.live = Live(console=console, refresh_per_second=2, transient=False)
        self.progress: Progress | None = None

    def __enter__(self) -> LiveView:
        self.live.__enter__()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.live.__exit__(kind, exc, tb)

    def update(self, progress: Progress) -> None:
        self.progress = progress
        self.live.update(
            Group(Text(summary(progress), style="bold"), slots_table(progress, time.time()))
        )

    def event(self, text: str) -> None:
        self.live.console.print(f"{time.strftime('%H:%M:%S')} {text}", markup=False)


class PlainView(View):
    """Plain lines (not a terminal): events, and the counts now and then."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._last = 0.0
        self._last_text = ""

    def __enter__(self) -> PlainView:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        pass

    def update(self, progress: Progress) -> None:
        text = summary(progress)
        if time.time() - self._last >= PLAIN_STATUS_S and text != self._last_text:
            self._last, self._last_text = time.time(), text
            self.console.print(f"{time.strftime('%H:%M:%S')} {text}", markup=False)

    def event(self, text: str) -> None:
        self.console.print(f"{time.strftime('%H:%M:%S')} {text}", markup=False, highlight=False)
