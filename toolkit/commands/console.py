"""The rich console every command prints through: styled on a terminal, plain text otherwise.

Piped into a file or another program, output must be what `grep` and a log file expect: no
ANSI escapes, and no line wrapped at an assumed 80 columns (rich's default width when it
cannot ask a terminal), which would split long paths and hashes in two. Tables keep their
natural width. `FORCE_COLOR` / `TTY_COMPATIBLE` (rich's own switches) still force styling.

A reader that goes away (`toolkit run ... | head -5`) ends most commands quietly, as rich does
(exit status 1, no traceback). A command with work in flight that must not be lost to it (a
run, a campaign) asks for a *steady* console: its output then goes nowhere and the work goes on.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from toolkit.grading.progress_bar import progress_lines

# Width of "unlimited" for a stream that is not a terminal: wide enough for any line we print.
PLAIN_WIDTH = 10_000


class SteadyConsole(Console):
    """A console that outlives its reader: a closed pipe silences it instead of exiting."""

    def on_broken_pipe(self) -> None:
        self.quiet = True  # rich drops whatever is printed from now on
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:  # and Python's own flush at exit finds a file that takes it
            os.dup2(devnull, self.file.fileno())
        finally:
            os.close(devnull)


# A terminal escape sequence: CSI (ESC [ or the C1 byte 0x9b ... final byte), OSC (ESC ] or
# 0x9d ... BEL or ST, e.g. OSC 0 sets the window title, OSC 52 the clipboard), and the other
# string commands (DCS, SOS, PM, APC) that run to ST; then any single ESC + one character.
_ESCAPES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|(?:\x1b[\]PX^_]|[\x9d\x90\x98\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b.?",
    re.DOTALL,
)
# Whatever control character is left: C0 (tab and newline too: one value, one line), DEL, C1.
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def terminal_text(text: object) -> str:
    """Text someone else wrote (a model name, a track title, a file name), made safe to print
    on a terminal: escape sequences removed whole, every other control character removed, and
    rich's markup (`[bold]`, `[link=...]`) escaped so that it is shown, never interpreted."""
    plain = _CONTROLS.sub(_blank, _ESCAPES.sub("", str(text)))
    return escape(plain)


def terminal_lines(text: str) -> str:
    """Lines of someone else's text (a CSV of the board) for a terminal: as `terminal_text`,
    but the line breaks kept and no markup escaped (nothing here goes through rich)."""
    return "\n".join(_CONTROLS.sub(_blank, _ESCAPES.sub("", line)) for line in text.split("\n"))


def _blank(match: re.Match[str]) -> str:
    """A tab or line break becomes a space (words stay apart); other controls go."""
    return " " if match.group() in "\t\n\r" else ""


def make_console(
    *, stderr: bool = False, steady: bool = False, plain_width: int = PLAIN_WIDTH
) -> Console:
    """A console on stdout (or stderr): the terminal's own when it is one, plain text if not.
    `steady`: a closed pipe silences it instead of ending the command (see the module doc).
    `plain_width`: the width of tables when not a terminal (a wide table folds its cells to
    it; lines of text are never wrapped)."""
    kind = SteadyConsole if steady else Console
    console = kind(stderr=stderr)
    if console.is_terminal:
        return console
    return kind(
        stderr=stderr,
        color_system=None,
        width=plain_width,
        soft_wrap=True,  # never insert line breaks of our own
        highlight=False,
        emoji=False,
        markup=True,  # markup is still parsed (and dropped), so no '[bold]' leaks out
    )


def run_progress(
    console: Console, total_s: float, quiet: bool
) -> tuple[Progress, Callable[[str], None], Callable[[float, float], None]]:
    """A run's progress bar over its budget, with what a run calls: `echo` (a line of the
    agent's console, above the bar; nothing when `quiet`) and `tick` (the clock moved)."""
    progress = Progress(
        TextColumn("[bold]run[/bold]"),
        BarColumn(),
        TextColumn("{task.completed:.0f}/{task.total:.0f}s"),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    )
    task = progress.add_task("run", total=total_s)

    def echo(line: str) -> None:
        if not quiet:
            progress.console.print(line, markup=False, highlight=False)

    def tick(elapsed: float, total: float) -> None:
        progress.update(task, completed=min(elapsed, total))

    return progress, echo, tick


def grading_lines(say: Callable[[str], None]) -> Callable[[str, int, int], None]:
    """A run's final grading, as lines for the operator's terminal (a `grading_progress`
    callback: phase, done, total; see `progress_lines`). The terminal only: agent.log and the
    result keep no time of a hidden grading."""
    return progress_lines(say, prefix="final grading: ")


def decimal_size(n: int) -> str:
    """`n` bytes for people, in decimal units (`1.5 MB`)."""
    size = float(n)
    for unit in ("B", "KB", "MB"):
        if size < 1000:
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1000
    return f"{size:,.1f} GB"
