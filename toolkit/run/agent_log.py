"""The harness's own notes about a run (`agent.log`), and the bound on how much of the agent's
text (an argument, a path, a provider's error) any line of it or a result's reason keeps.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

LOG_LINE_CHARS = 16_000
STATUS_REASON_CHARS = 2_000


def bounded(text: str, limit: int) -> str:
    """`text`, or its head and tail with a note of how much was cut from the middle."""
    if len(text) <= limit:
        return text
    keep = max(0, limit - 40) // 2
    return f"{text[:keep]} [... {len(text) - 2 * keep:,} characters cut ...] {text[-keep:]}"


class AgentLog:
    """The harness's own notes about the run (`agent.log`): what happened when, and why."""

    def __init__(self, path: Path, clock: Callable[[], float], echo: Callable[[str], None]):
        self.path = path
        self._clock = clock
        self._echo = echo
        self._lock = threading.Lock()
        self._held: float | None = None
        self._sealed = False
        self.lost = 0  # lines the disk could not take (a full results volume)

    def hold(self) -> None:
        """Stamp this line and every later one with the time now: from a hidden grading's
        start on, a stamp would tell how long the bundle took (a channel it can steer)."""
        self._held = self._clock()

    def seal(self) -> None:
        """The file is about to be hashed into the result: later lines are only echoed."""
        with self._lock:
            self._sealed = True

    def __call__(self, message: str, shown: str | None = None) -> None:
        """Write `message`; echo it to the operator, or `shown` instead ("": nothing), for a
        line whose text the command prints anyway (the result's reason: printed once). A line
        the disk cannot take is counted (`lost`), never an error that would end the run."""
        stamp = f"[{self._clock() if self._held is None else self._held:8.1f}s]"
        line = f"{stamp} {bounded(message, LOG_LINE_CHARS)}"
        with self._lock:
            if not self._sealed:
                try:
                    with self.path.open("a", encoding="utf-8") as f:
                        f.write(line + "\n")
                except OSError:
                    self.lost += 1
        if shown is None:
            self._echo(line)
        elif shown:
            self._echo(f"{stamp} {shown}")


def quiet(_: str) -> None:
    """An echo that shows nothing (a run started without a console)."""
