"""`toolkit doctor`: whether this host can run a track validly, and what to fix if not."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from toolkit.commands.console import make_console
from toolkit.commands.options import known_track, registry_option, results_dir_option
from toolkit.host.doctor import Check, Doctor, failed, opencode_check
from toolkit.sandbox import BACKENDS
from toolkit.tracks.model import Track

PIPED_WIDTH = 100
"""Columns of doctor's table when not on a terminal (a terminal's own width otherwise)."""


def preflight(track: Track, backend: str) -> None:
    """`toolkit run`'s fast checks, before any work: one line and a non-zero exit when the
    track cannot run validly here."""
    bad = failed(Doctor(track, backend).fast(required_only=True))
    if bad:
        first = bad[0]
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise click.ClickException(
            f"track '{track.id}' cannot run validly on this host: {first.name}: {first.here}; "
            f"it needs {first.need}{more}. Fix: {first.fix}. "
            f"`toolkit doctor --track {track.id} --backend {backend}` lists every check"
        )


def _table(checks: list[Check], title: str) -> Table:
    table = Table(title=title, title_justify="left", header_style="bold")
    for column in ("", "check", "the track needs", "this host", "fix"):
        # A path or a command longer than its column folds onto the next line: cut with an
        # ellipsis, a fix could not be copied (a narrow terminal, e.g. 100 columns).
        table.add_column(column, overflow="fold")
    for c in checks:
        mark = (
            "[green]ok[/green]"
            if c.ok
            else ("[red]NO[/red]" if c.required else "[yellow]--[/yellow]")
        )
        table.add_row(mark, c.name, c.need or "—", c.here, c.fix)
    return table


@click.command("doctor")
@click.option("--track", "track_id", default="demo-cpu-3", show_default=True, help="Track id.")
@click.option(
    "--backend",
    type=click.Choice(BACKENDS),
    default="local",
    show_default=True,
    help="Sandbox backend the runs would use.",
)
@click.option("--provider", default=None, help="Also check this provider's key (one request).")
@click.option("--model", default=None, help="The model for the provider check.")
@click.option(
    "--providers",
    "providers_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Providers file for --provider (default: $ARI_PROVIDERS, else the toolkit's "
    "providers.toml), as `toolkit run --providers`.",
)
@results_dir_option("Results folder holding tracks.json")
@registry_option()
def doctor_command(
    track_id: str,
    backend: str,
    provider: str | None,
    model: str | None,
    providers_path: Path | None,
    results_dir: Path,
    registry: Path | None,
) -> None:
    """Check that this host can run a track validly: one row per need, with the fix.

    Cgroups and their delegation, user namespaces, loop devices, the track's isolation floor
    on the chosen backend, the GPUs, the driver and torch's build, the Docker engine's GPU
    support, free disk, and (with --provider) the opencode binary and the provider's key.
    Exits 1 when a required check fails: `toolkit run` would refuse the track here.

    \b
    Examples:
      toolkit doctor                                   # the demo track, local backend
      toolkit doctor --track v1-h100-1h --backend docker
      toolkit doctor --track v1-h100-1h --provider openai --model gpt-5
      toolkit doctor --provider mine --providers my-providers.toml --model m1
    """
    track = known_track(results_dir, registry, track_id)
    checks = Doctor(track, backend).fast()
    if provider is not None:
        checks.append(opencode_check(required=True))
        checks.append(_provider_check(provider, model, providers_path))
    console = make_console(plain_width=PIPED_WIDTH)  # piped: cells fold, to a mail or a log
    console.print(_table(checks, f"toolkit doctor · track {track.id} · backend {backend}"))
    bad = failed(checks)
    if bad:
        console.print(
            f"[red]track '{track.id}' cannot run validly here[/red]: "
            + ", ".join(c.name for c in bad)
        )
        raise SystemExit(1)
    console.print(f"[green]this host can run track '{track.id}' on the {backend} backend[/green]")


def _provider_check(provider: str, model: str | None, providers_path: Path | None) -> Check:
    """One tiny request through the relay the runs would use."""
    from toolkit.agents import AgentSetupError, get_agent

    if not model:
        raise click.UsageError("--provider needs --model (the model to ask)")
    try:
        agent = get_agent(
            "opencode",
            model=model,
            provider=provider,
            providers_path=providers_path,
            any_version=True,
        )
        problem = agent.preflight()
    except AgentSetupError as exc:
        problem = str(exc)
    return Check(
        "provider",
        f"{provider} answers for {model}",
        "answers" if problem is None else escape(problem),  # the provider's words: not markup
        problem is None,
        required=problem is not None,
        fix="" if problem is None else "check the key, the model name and the provider entry",
    )
