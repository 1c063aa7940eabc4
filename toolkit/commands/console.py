"""The rich console every command prints through: styled on a terminal, plain text otherwise.

Piped into a file or another program, output must be what `grep` and a log file expect: no
ANSI escapes, and no line wrapped at an assumed 80 columns (rich's default width when it
cannot ask a terminal), which would split long paths and hashes in two. Tables keep their
natural width. `FORCE_COLOR` / `TTY_COMPATIBLE` (rich's own switches) still force styling.
"""

from __future__ import annotations

from rich.console import Console

# Width of "unlimited" for a stream that is not a terminal: wide enough for any line we print.
PLAIN_WIDTH = 10_000


def make_console(*, stderr: bool = False) -> Console:
    """A console on stdout (or stderr): the terminal's own when it is one, plain text if not."""
    console = Console(stderr=stderr)
    if console.is_terminal:
        return console
    return Console(
        stderr=stderr,
        color_system=None,
        width=PLAIN_WIDTH,
        soft_wrap=True,  # never insert line breaks of our own
        highlight=False,
        emoji=False,
        markup=True,  # markup is still parsed (and dropped), so no '[bold]' leaks out
    )
