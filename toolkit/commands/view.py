"""`toolkit view`: the leaderboard of a results folder and the runs going on, live, locally."""

from __future__ import annotations

import hashlib
from pathlib import Path

import click

from toolkit.commands.console import make_console
from toolkit.commands.options import results_dir_option
from toolkit.paths import state_dir


@click.command("view")
@results_dir_option("Results folder to show")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="Port (0: any free one).")  # fmt: skip
def view_command(results_dir: Path, host: str, port: int) -> None:
    """A live local web view: the leaderboard site of a results folder, rebuilt as results
    arrive, and every run of this host with a timeline of its hour (runner calls, submissions
    with their public scores, the promotion, time left), refreshed while it runs. A result
    file that fails its checks is left off the board and listed, with its reason, on the
    site's "Refused result files" page.

    \b
    Examples:
      toolkit view --results /tmp/ari-results          # then open http://127.0.0.1:8765/
      toolkit view --results .ari/demo/results --port 0
    """
    from toolkit.view import serve

    if not results_dir.is_dir():
        raise click.UsageError(f"{results_dir}: no such results folder")
    key = hashlib.sha256(str(results_dir.resolve()).encode()).hexdigest()[:12]
    console = make_console(stderr=True)

    def announce(url: str) -> None:
        console.print(f"serving {results_dir} at {url} (runs: {url}live/); Ctrl-C stops")

    try:
        serve(results_dir, host, port, state_dir() / "view" / key, announce)
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc.strerror}") from None
