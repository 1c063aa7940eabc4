"""How a grading's progress is shown: a bar on a terminal (`grade_bundle(progress=True)` draws
it on stderr, one task per step), else lines (`progress_lines`), so that a grading whose output
goes to a file or a pipe is not silent for minutes either."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

LINE_EVERY_S = 15.0  # at most one line per step in between its start and its end


def progress_lines(
    say: Callable[[str], None],
    *,
    prefix: str = "",
    every_s: float = LINE_EVERY_S,
    clock: Callable[[], float] = time.monotonic,
) -> Callable[[str, int, int], None]:
    """A progress callback (step, done, total) that says each step when it starts and when it
    is done, with how long it took, and in between at most one line every `every_s` seconds;
    a step first reported complete (an outcome, `ablation: done, ...`) is one line."""
    step: list[str] = []
    since = last = 0.0

    def report(name: str, done: int, total: int) -> None:
        nonlocal since, last
        now = clock()
        if not step or step[0] != name:
            step[:] = [name]
            since = last = now
            # A step first reported complete is an outcome, said as it is (no "...").
            say(f"{prefix}{name}" if total and done >= total else f"{prefix}{name}...")
        elif done >= total:
            say(f"{prefix}{name}: done in {now - since:.0f} s")
            last = now
        elif now - last >= every_s:
            say(f"{prefix}{name} {done}/{total} ({now - since:.0f} s)")
            last = now

    return report


class ProgressBar:
    """A rich progress bar (on stderr) with one task per step; lines where stderr is not a
    terminal (a bar there would show nothing until the grading is over)."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        console = Console(stderr=True)
        self.lines = None
        if not console.is_terminal:
            plain = Console(stderr=True, color_system=None, soft_wrap=True, highlight=False)
            self.lines = progress_lines(lambda line: plain.print(line, markup=False))
        self.bar = Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=False,
            disable=self.lines is not None,
        )
        self.tasks: dict[str, Any] = {}

    def __enter__(self) -> ProgressBar:
        self.bar.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.bar.stop()

    def update(self, name: str, done: int, total: int) -> None:
        if self.lines is not None:
            self.lines(name, done, total)
            return
        if name not in self.tasks:
            self.tasks[name] = self.bar.add_task(name, total=total)
        self.bar.update(self.tasks[name], completed=done, total=total)
