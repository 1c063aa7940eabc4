"""`toolkit campaign plan|run`: every (model, effort, seed) run of a board, from one file.

Exit status of `run`: 0 when every run of the campaign has a final result (`valid` or
`failed`); 1 when the campaign gave up on some (every attempt ended `invalid`); 2 for usage
errors. Runs another campaign holds are waited for, not skipped.
"""

from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from toolkit.campaign.claims import plan_record, shown_state
from toolkit.campaign.config import CampaignError
from toolkit.campaign.driver import Campaign, Driver, Progress
from toolkit.campaign.engine import Engine
from toolkit.campaign.plan import KeyPlan
from toolkit.campaign.view import LiveView, PlainView, summary
from toolkit.commands.console import make_console
from toolkit.commands.leaderboard import leaderboard_command
from toolkit.commands.options import Refused, results_write_problem
from toolkit.results.model import ResultsError
from toolkit.results.signing import SigningError, local_key
from toolkit.run.interrupt import raise_interrupted
from toolkit.run.recovery import recover_runs
from toolkit.tracks.model import RegistryError
from toolkit.tracks.registry import carry_track

FILE = click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
BUDGET = click.option(
    "--budget",
    type=click.FloatRange(min=10),
    default=None,
    help="Override the budget in seconds (demo tracks only; same as budget_s in the file).",
)


def _open(file: Path, budget: float | None) -> Campaign:
    from toolkit.campaign.setup import open_campaign

    try:
        return open_campaign(file, budget)
    except CampaignError as exc:
        raise click.UsageError(str(exc)) from None


def _plan(campaign: Campaign) -> list[KeyPlan]:
    try:
        return campaign.plan()
    except ResultsError as exc:
        raise click.ClickException(str(exc)) from None


@click.group("campaign")
def campaign_group() -> None:
    """Run every (model, effort, seed) of a leaderboard from one campaign file.

    A campaign file (campaign.toml) names the track, the agent and backend, the models with
    their efforts, the seeds and the results folder. `plan` shows what is done and what is
    missing; `run` does what is missing, on this box's GPUs or on a Ray cluster, and can be
    killed and started again at any time.

    \b
    Example:
      toolkit campaign plan campaign.toml
      toolkit campaign run campaign.toml --gpus 0,1,2,3
    """


@campaign_group.command("plan")
@FILE
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="table: for people; json: one object per run key.",
)
@BUDGET
def plan_command(file: Path, fmt: str, budget: float | None) -> None:
    """Show the runs the campaign implies and which are done, to rerun, or missing.

    A run (track, model, effort, seed) is done when it has a `valid` or `failed` result made
    the way this campaign makes it (agent, budget, current protocol revision); `rerun` when it
    has only `invalid` results, fewer than the file's attempts; `exhausted` when it has used
    them all.

    \b
    Example:
      toolkit campaign plan campaign.toml --format json
    """
    campaign = _open(file, budget)
    plans = sorted(_plan(campaign), key=lambda p: p.key.sort_key())
    if fmt == "json":
        click.echo(json.dumps([plan_record(p, campaign.results_dir) for p in plans], indent=2))
        return
    console = make_console()
    table = Table(
        title=f"campaign {file} · track {campaign.track.id} · results {campaign.results_dir}",
        title_justify="left",
        header_style="bold",
    )
    for column in ("model", "effort", "seed", "state", "results", "last result"):
        table.add_column(column)
    colours = {
        "valid": "green",
        "failed": "yellow",
        "rerun": "red",
        "exhausted": "bold red",
        "running": "cyan",
    }
    for plan in plans:
        counts: dict[str, int] = {}
        for _, result in plan.results:
            counts[result.status] = counts.get(result.status, 0) + 1
        state = shown_state(campaign.results_dir, plan)
        colour = colours.get(state, "")
        table.add_row(
            plan.key.model,
            plan.key.effort or "",
            str(plan.key.seed),
            f"[{colour}]{state}[/{colour}]" if colour else state,
            ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "—",
            plan.results[-1][0].name if plan.results else "",
        )
    states = [shown_state(campaign.results_dir, p) for p in plans]
    table.caption = ", ".join(f"{states.count(s)} {s}" for s in dict.fromkeys(states))
    console.print(table)


@campaign_group.command("run")
@FILE
@click.option(
    "--engine",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    help="local: this box's GPUs (or --slots); ray: one Ray task per run on a cluster.",
)
@click.option("--address", default=None, help="Ray cluster address (default: RAY_ADDRESS).")
@click.option("--gpus", default=None, help="local: the GPU ids to use, e.g. 0,1 (default: all).")
@click.option(
    "--slots",
    type=click.IntRange(min=1),
    default=None,
    help="local: CPU runs at a time on a box without GPUs (demo tracks).",
)
@click.option(
    "--ray-resource",
    default=None,
    metavar="NAME",
    help="ray: ask each task for one unit of this custom resource instead of a GPU.",
)
@click.option(
    "--accept-host-channel",
    default=None,
    metavar="RATE",
    help="Run an official track with more than one run on this host at once, accepting the "
    "measured rate of what the host shares between them (give it: see the refusal).",
)
@click.option(
    "--skip-failing-models",
    is_flag=True,
    help="Leave out the runs of a model whose provider fails the pre-flight check (with a note) "
    "instead of refusing to start.",
)
@BUDGET
@click.pass_context
def run_command(
    ctx: click.Context,
    file: Path,
    engine: str,
    address: str | None,
    gpus: str | None,
    slots: int | None,
    ray_resource: str | None,
    skip_failing_models: bool,
    accept_host_channel: str | None,
    budget: float | None,
) -> None:
    """Do every run of the campaign that has no final result yet; safe to start again.

    Runs with a `valid` or `failed` result are skipped; `invalid` ones (infrastructure
    failures) are rerun up to the file's attempts. Each run key is claimed while it runs, so
    two campaigns on one results folder never do the same run. Killed half way, a campaign
    started again does only what is still missing. At the end: the track's leaderboard.

    Before anything starts, each model with runs to do is checked once (one tiny call to its
    provider with its key): a model that fails is named in one line and the campaign refuses
    to start, unless --skip-failing-models leaves that model's runs out.

    On an official track, runs side by side on one host are refused (what a host shares
    between sandboxes is a channel of measured rate) unless --accept-host-channel names that
    rate; and every run's hidden grading waits until it is alone on its host.

    \b
    Example:
      toolkit campaign run campaign.toml                      # every GPU of this box
      toolkit campaign run campaigns/demo.toml --slots 2      # a box without GPUs (shipped)
      toolkit campaign run campaign.toml --engine ray --address ray://head:10001
    """
    from toolkit.campaign import setup

    campaign = _open(file, budget)
    if engine == "local" and (ray_resource is not None or address is not None):
        raise click.UsageError("--ray-resource and --address are for --engine ray")
    if engine == "ray" and (gpus is not None or slots is not None):
        raise click.UsageError("--gpus and --slots are for --engine local; Ray assigns GPUs")
    try:  # GPU ids this host cannot use: refused before any work
        local = engine == "local"
        the_slots = setup.local_slots(gpus, slots, campaign.file.backend) if local else []
        setup.accept_host_channel(campaign.track, the_slots, accept_host_channel)
    except CampaignError as exc:
        raise Refused(str(exc)) from None
    try:
        local_key()  # the driver signs what it writes: a key that cannot sign stops us now
    except SigningError as exc:
        raise click.UsageError(str(exc)) from None
    # Steady: a reader that goes away (`| head`) silences the campaign, never stops its runs.
    console = make_console(stderr=True, steady=True)
    unwritable = results_write_problem(campaign.results_dir, campaign.track.id)
    if unwritable:  # before any provider call, exam or data: one line
        raise Refused(unwritable)
    plans = _plan(campaign)  # a bad result file stops us here, with its name
    campaign = _preflight(campaign, plans, skip_failing_models, console)
    if campaign.registry is not None:  # the results folder carries its track (and fixes)
        try:
            carry_track(campaign.results_dir, campaign.registry, campaign.track)
        except RegistryError as exc:
            raise click.UsageError(str(exc)) from None
    for path in recover_runs():
        console.print(f"[yellow]recorded an interrupted run as invalid: {path}[/yellow]")
    prepared: Path | None = None
    runner: Engine
    signal.signal(signal.SIGTERM, raise_interrupted)
    try:
        if engine == "local":
            console.print("preparing the exam and the training data...")
            settings, prepared = setup.local_inputs(campaign)
            runner = setup.local_engine(campaign, the_slots)
            where = ", ".join(s.name for s in the_slots)
        else:
            settings, (runner, notes) = {}, setup.ray_engine(campaign, address, ray_resource)
            where = f"Ray cluster ({ray_resource or 'GPU'} slots)"
            for note in notes:  # hosts whose gradings would slow each other
                console.print(f"note: {note}", style="yellow", markup=False, highlight=False)
        console.print(f"campaign {file}: track {campaign.track.id}, engine {engine}: {where}")
        view = LiveView(console) if console.is_terminal else PlainView(console)
        with view:
            progress = Driver(campaign, runner, view, settings).run()
    except CampaignError as exc:
        raise click.UsageError(str(exc)) from None
    except ResultsError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        if prepared is not None:
            shutil.rmtree(prepared, ignore_errors=True)
    _report(progress, console)
    if not (campaign.results_dir / "tracks.json").is_file():
        console.print(f"no leaderboard: {campaign.results_dir} holds no tracks.json")
    else:
        ctx.invoke(
            leaderboard_command,
            track_id=campaign.track.id,
            results_dir=campaign.results_dir,
            fmt="table",
        )
    if progress.gave_up:
        raise SystemExit(1)


def _preflight(campaign: Campaign, plans: list[KeyPlan], skip: bool, console: Console) -> Campaign:
    """Each model with runs to do, checked once before anything starts (`campaign.preflight`):
    the campaign as it will run, or a refusal naming each failing model in one line."""
    from toolkit.campaign.preflight import check_models, without

    failing = check_models(campaign, plans)
    if not failing:
        return campaign
    if not skip:
        for bad in failing:
            console.print(bad.line(), markup=False, highlight=False)
        raise click.ClickException(
            f"{len(failing)} model(s) failed the provider pre-flight check: fix their keys or "
            "provider entries, or pass --skip-failing-models to leave their runs out"
        )
    for bad in failing:
        console.print(
            f"note: leaving out {bad.runs} run(s) of {bad.line()}", markup=False, highlight=False
        )
    try:
        return without(campaign, {bad.model for bad in failing})
    except CampaignError as exc:
        raise click.ClickException(str(exc)) from None


def _report(progress: Progress, console: Console) -> None:
    console.print(summary(progress))
    for key, reason in progress.gave_up:
        console.print(f"[red]gave up[/red] {key.label()}: {reason}")
