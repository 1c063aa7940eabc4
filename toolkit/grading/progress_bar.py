"""The progress bar `grade_bundle(progress=True)` draws on stderr: one task per phase."""

from __future__ import annotations

from typing import Any


class ProgressBar:
    """A rich progress bar (on stderr) with one task per phase."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        self.bar = Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=False,
        )
        self.tasks: dict[str, Any] = {}

    def __enter__(self) -> ProgressBar:
        self.bar.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.bar.stop()

    def update(self, name: str, done: int, total: int) -> None:
        if name not in self.tasks:
            self.tasks[name] = self.bar.add_task(name, total=total)
        self.bar.update(self.tasks[name], completed=done, total=total)
