"""`toolkit leaderboard`: the site's leaderboard, in the terminal (or as CSV / JSON)."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import click
from rich.table import Table

from toolkit.commands.console import make_console, terminal_lines, terminal_text
from toolkit.commands.options import results_dir_option
from toolkit.results.model import ResultsError
from toolkit.results.published import one_line
from toolkit.stats import Row, leaderboard, load_results, to_csv, to_json
from toolkit.tracks.model import RegistryError, Track


def _num(value: float | None, fmt: str = "{:.1f}") -> str:
    return "—" if value is None else fmt.format(value)


def _score(row: Row) -> str:
    if row.mean is None:
        return "—"
    se = "n/a" if row.se is None else f"{row.se:.1f}"
    return f"{row.mean:.1f} ± {se}"


def _flags(row: Row) -> str:
    flags = []
    if row.legacy:
        flags.append(f"legacy (r{row.protocol_revision}, fix {row.superseded_by or '?'})")
    if row.provisional and not row.legacy:
        flags.append("provisional")
    if row.awaiting_rerun:
        flags.append(f"{len(row.awaiting_rerun)} awaiting rerun")
    if row.repeats:
        flags.append(f"{len(row.repeats)} repeat(s) of a counted seed, not averaged")
    if row.off_rules:
        flags.append(f"{len(row.off_rules)} run(s) off the track's rules, not averaged")
    if row.unverified:
        flags.append(f"{len(row.unverified)} unverified run(s) (signature), not counted")
    if row.model_free_suspects:
        flags.append(f"{len(row.model_free_suspects)} model-free suspect(s), under review")
    return ", ".join(flags)


def _table(track: Track, rows: list[Row], results_dir: Path) -> Table:
    title = terminal_text(f"{track.title} [{track.id}] exam {track.exam_sha256[:8]}")
    table = Table(title=title, title_justify="left", header_style="bold")
    for name, justify in [
        ("rank", "right"),
        ("model", "left"),
        ("effort", "left"),
        ("score % ± SE", "right"),
        ("seeds", "right"),
        ("bpb", "right"),
        ("best public", "right"),
        ("gap", "right"),
        ("notes", "left"),
    ]:
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for row in rows:
        table.add_row(
            row.rank_label or "—",
            terminal_text(row.model),
            terminal_text(row.effort or ""),
            _score(row),
            f"{row.n}/{row.seeds_required}",
            _num(row.bits_per_byte, "{:.2f}"),
            _num(row.best_public),
            _num(row.gap, "{:+.1f}"),
            terminal_text(_flags(row)),
        )
    if not rows:
        where = terminal_text(str(results_dir))
        table.caption = f"no results yet in {where} (runs written elsewhere: --results DIR)"
    return table


@click.command("leaderboard")
@click.option("--track", "track_id", metavar="T", help="Only this track (default: every track).")
@results_dir_option("The results folder (registry + per-run files)")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "csv", "json"]),
    default="table",
    show_default=True,
    help="table: for people; csv / json: the same columns as the site's downloads.",
)
def leaderboard_command(track_id: str | None, results_dir: Path, fmt: str) -> None:
    """Print the leaderboard: mean ± SE per (model, effort), with each row's rank range.

    A row counts one run per distinct seed, run under the track's rules; fewer seeds than the
    track requires make it provisional. Invalid runs are awaiting rerun; runs graded under a
    superseded protocol revision are legacy rows, shown last and never ranked. A run whose
    result file is not signed by a pinned key (`toolkit keys`; never the folder's own list) is
    unverified: noted on its row, never counted. A rank like "2–4" is the range of places the
    row could hold: its interval (mean ± SE) overlaps others. A result file that fails its
    checks (bad JSON or field, a link on its path) is left off the board and listed on stderr,
    with its reason; the exit status is then 1.

    \b
    Example:
      toolkit leaderboard --track demo-cpu --results results --format table
    """
    refuse_track_folder(results_dir)
    try:
        results = load_results(results_dir, keep_going=True)
    except (ResultsError, RegistryError) as exc:
        raise click.ClickException(str(exc)) from exc
    if track_id is not None and track_id not in results.tracks:
        known = ", ".join(sorted(results.tracks)) or "none"
        from toolkit.commands.options import Refused, find_registry
        from toolkit.tracks.model import load_tracks

        elsewhere = find_registry(results_dir, None, track_id)
        with contextlib.suppress(RegistryError):
            if track_id in load_tracks(elsewhere):  # registered, just not run into this folder
                raise Refused(
                    f"no runs of track '{track_id}' in {results_dir} yet (its tracks.json lists "
                    f"{known}; the track is registered in {elsewhere}): a run writes it there, "
                    f"or pick --results with its runs"
                )
        raise click.BadParameter(
            f"unknown track '{track_id}' in {results_dir}/tracks.json (known: {known}); see "
            "`toolkit tracks list`",
            param_hint="--track",
        )
    tracks = [results.tracks[track_id]] if track_id else list(results.tracks.values())
    boards = [(t, leaderboard(results, t)) for t in tracks]
    all_rows = [r for _, rows in boards for r in rows]
    if fmt == "csv":
        text = to_csv(all_rows)
        if sys.stdout.isatty():  # a file gets the cells as they are; a terminal, no escapes
            text = terminal_lines(text)
        click.echo(text, nl=False)
    elif fmt == "json":
        click.echo(to_json(all_rows, tracks), nl=False)
    else:
        console = make_console()
        if not tracks:
            console.print(
                terminal_text(f"No tracks registered in {results_dir} yet: no results to show.")
            )
        for track, rows in boards:
            console.print(_table(track, rows, results_dir))
    for problem in results.refused:  # after the board: each bad file costs its own row only
        click.echo(f"refused: {one_line(problem)}", err=True)
    if results.refused:
        click.echo(f"{len(results.refused)} result file(s) refused, left off the board", err=True)
        raise SystemExit(1)


def refuse_track_folder(results_dir: Path) -> None:
    """`--results results/demo-cpu-3` (a track's folder of runs, not a results folder): said in
    one line with the command meant, instead of an empty board and exit status 0."""
    from toolkit.commands.options import Refused
    from toolkit.tracks.model import TRACKS_FILE

    if (results_dir / TRACKS_FILE).is_file() or not results_dir.is_dir():
        return
    parent = results_dir.resolve().parent
    registry_files = {"signing_keys.json", "protocol_fixes.json"}  # a results folder's own
    holds_runs = any(p.name not in registry_files for p in results_dir.glob("*.json"))
    if holds_runs or (parent / TRACKS_FILE).is_file():
        track = results_dir.resolve().name
        raise Refused(
            f"{results_dir} holds no {TRACKS_FILE}: it looks like the folder of track "
            f"'{track}'s runs; pass the results folder above it: "
            f"toolkit leaderboard --results {parent} --track {track}"
        )
