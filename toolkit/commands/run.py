"""`toolkit run`: one agent run under a track's rules (`toolkit runs`: commands/runs.py).

Exit status: 0 when the run ended `valid` or `failed` (a failed run is a result: it scores 0);
1 when it ended `invalid` (infrastructure failure: rerun it); 2 for usage errors; 130 when
stopped with Ctrl-C (143 with SIGTERM): the run is recorded `invalid`, interrupted.
"""

from __future__ import annotations

import signal
from pathlib import Path

import click

from exam_builder.exam_file import ExamFileError
from toolkit import state
from toolkit.agents import AGENTS, AgentSetupError, get_agent
from toolkit.agents.providers import cost_cap_check, cost_cap_note
from toolkit.agents.relay.budget import limits_for
from toolkit.agents.scripted import BASELINE_MODEL
from toolkit.campaign.plan import RunKey
from toolkit.commands.console import grading_lines, make_console, run_progress
from toolkit.commands.doctor import preflight
from toolkit.commands.images import images_option, run_image_digests
from toolkit.commands.options import (
    Refused,
    claim_run_key,
    cpus_option,
    device_option,
    find_registry,
    model_for,
    refuse_device,
    refuse_stray_results,
    registry_option,
    results_dir_option,
    results_write_problem,
)
from toolkit.results.signing import (
    SigningError,
    local_key,
)
from toolkit.results.summary import (
    note_untrusted_key,
    print_result,
    say_interrupted,
    warn_if_in_worktree,
)
from toolkit.run.inputs import InputError, prepare_inputs
from toolkit.run.interrupt import Interrupted, raise_interrupted
from toolkit.run.orchestrate import execute_run
from toolkit.run.recovery import recover_runs
from toolkit.run.roles import default_gpu, detect_device
from toolkit.run.spec import (
    RunSpec,
    budget_override_note,
    env_secrets,
    new_run_id,
    scaled_budget,
)
from toolkit.run.workspace import WorkspaceError
from toolkit.sandbox import BACKENDS
from toolkit.text.data import DataError, check_source
from toolkit.tracks.model import RegistryError, get_track
from toolkit.tracks.registry import carry_track


@click.command("run")
@click.option(
    "--model",
    default=None,
    help=f"Model under test (the scripted agent's runs are recorded as '{BASELINE_MODEL}').",
)
@click.option("--effort", default=None, help="Reasoning effort (part of the row's identity).")
@click.option("--seed", required=True, type=click.IntRange(min=0), help="Run seed.")
@click.option(
    "--agent",
    type=click.Choice(sorted(AGENTS)),
    default="scripted",
    show_default=True,
    help="Agent scaffold. 'scripted' trains the starter as-is; 'opencode' is a real model.",
)
@click.option(
    "--provider",
    default=None,
    help="Model provider, for --agent opencode: an entry of providers.toml (e.g. openai).",
)
@click.option(
    "--providers",
    "providers_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Providers file (default: $ARI_PROVIDERS, else the toolkit's providers.toml).",
)
@click.option(
    "--any-scaffold-version",
    is_flag=True,
    help="Run with the installed opencode even if it is not the pinned version (recorded).",
)
@click.option(
    "--backend",
    type=click.Choice(BACKENDS),
    default="local",
    show_default=True,
    help="Sandbox backend of the three roles: local processes, or three Docker containers.",
)
@images_option
@click.option(
    "--track", default="demo-cpu-3", show_default=True, help="Track id (results/tracks.json)."
)
@click.option(
    "--budget",
    type=click.FloatRange(min=10),
    default=None,
    help="Override the budget in seconds (demo tracks only; per-call and reserved scale with it).",
)
@click.option(
    "--exam",
    type=click.Path(exists=True, path_type=Path),
    default=None,
    help="The track's exam (exam.jsonl or its folder). Demo tracks build theirs if omitted.",
)
@click.option(
    "--train-data",
    type=click.Path(exists=True, path_type=Path),
    default=None,
    help="Training text (.txt, folder, .jsonl, .parquet). Default: the built-in corpus.",
)
@results_dir_option(
    "Results folder: holds tracks.json; the run goes to <results>/<track>/<run_id>.json"
)
@registry_option()
@device_option("Device for grading (training picks its own inside the runner).")
@cpus_option("the runner and of each grading (a share of a box that runs several runs)")
@click.option(
    "--max-tokens-total",
    type=click.IntRange(min=1),
    default=None,
    help="Token budget of the run's model calls (all parts of their usage); once spent, the "
    "provider relay refuses further calls. Default: the track's max_tokens_total.",
)
@click.option(
    "--max-cost-usd",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Cost budget of the run's model calls in USD, where they can be priced. Default: the "
    "track's max_cost_usd.",
)
@click.option("--quiet", is_flag=True, help="Do not echo the agent's console.")
def run_command(
    model: str | None,
    effort: str | None,
    seed: int,
    agent: str,
    provider: str | None,
    providers_path: Path | None,
    any_scaffold_version: bool,
    backend: str,
    track: str,
    budget: float | None,
    exam: Path | None,
    train_data: Path | None,
    results_dir: Path,
    registry: Path | None,
    device: str,
    cpus: float | None,
    max_tokens_total: int | None,
    max_cost_usd: float | None,
    quiet: bool,
    images_file: Path | None,
) -> None:
    """Run one agent under a track's rules and publish its result.

    The agent gets a workspace (task brief, starter, training data, public validation set) and a
    shell whose only way to compute is `runner`; the harness enforces the clock, kills
    everything at the deadline, grades the last promoted candidate on the exam and writes
    <results>/<track>/<run_id>.json with the audit log, history and transcript beside it.

    \b
    Examples:
      toolkit run --agent scripted --backend local --track demo-cpu-3 --seed 0 \\
          --results /tmp/ari-results
      OPENAI_API_KEY=... toolkit run --agent opencode --provider openai --model gpt-5 \\
          --effort high --track demo-cpu-3 --seed 0 --results /tmp/ari-results
    """
    # Steady consoles: a reader that goes away (`| head`) silences the run, never stops it.
    console = make_console(stderr=True, steady=True)
    refuse_device(device, backend)  # a GPU this host cannot use: refused before any work
    refuse_stray_results(results_dir)
    unwritable = results_write_problem(results_dir, track)  # before any work, not at the end
    if unwritable:
        raise Refused(unwritable)
    model = model_for(agent, model)
    try:
        local_key()  # the result will be signed: a key that cannot sign stops the run now
    except SigningError as exc:
        raise click.UsageError(str(exc)) from exc
    registry_dir = find_registry(results_dir, registry, track)
    try:
        the_track = get_track(registry_dir, track)
    except RegistryError as exc:
        raise click.UsageError(str(exc)) from exc
    if budget is not None and not the_track.demo:
        raise click.UsageError(
            f"--budget is for trying things out: track '{track}' is official and its "
            "budget is part of what it freezes"
        )
    budget_s, per_call, reserved = scaled_budget(the_track, budget)
    try:
        the_agent = get_agent(
            agent,
            model=model,
            effort=effort,
            provider=provider,
            providers_path=providers_path,
            any_version=any_scaffold_version,
            limits=limits_for(the_track, max_tokens_total, max_cost_usd),
        )
    except (AgentSetupError, ValueError) as exc:
        raise click.UsageError(str(exc)) from exc
    entry = getattr(the_agent, "provider_entry", None)
    unenforceable = cost_cap_check(entry, max_cost_usd)
    if unenforceable:
        raise Refused(unenforceable)
    preflight(the_track, backend)  # before any work: a track this host cannot run is refused
    # Then the provider: one tiny call with the run's key, endpoint and model, before anything
    # is prepared or written and before the clock (a bad key costs seconds, not the budget).
    provider_problem = the_agent.preflight()
    if provider_problem is not None:
        raise click.ClickException(provider_problem)
    cost_note = None if max_cost_usd else cost_cap_note(entry, the_track.max_cost_usd)
    for note in (cost_note, budget_override_note(the_track, budget)):
        if note:  # said once the run is sure to start (a refusal above stays one line)
            console.print(f"note: {note}", markup=False, highlight=False)
    if train_data is not None:  # a text we cannot read: refused before anything is written
        try:
            check_source(train_data)
        except DataError as exc:
            raise Refused(str(exc)) from None
    try:  # the results folder carries its track: the leaderboard and the site can read it
        carry_track(results_dir, registry_dir, the_track)
    except RegistryError as exc:
        raise click.UsageError(str(exc)) from exc
    # One run of a (track, model, effort, seed) at a time per results folder, as campaigns
    # claim theirs (the same claims: a run and a campaign exclude each other too).
    claim_run_key(results_dir, RunKey(the_track.id, model, effort, seed))
    image_digests = run_image_digests(backend, images_file)
    for path in recover_runs():
        console.print(f"[yellow]recorded an interrupted run as invalid: {path}[/yellow]")
    data_dir = state.new_data_dir()
    try:
        exam_path, public = prepare_inputs(the_track, exam, train_data, data_dir, console.print)
    except (InputError, ExamFileError, DataError) as exc:
        state.remove_tree(data_dir)  # nothing of a failed start stays in $ARI_HOME
        raise click.UsageError(str(exc)) from exc
    warn_if_in_worktree(results_dir, the_track.id, the_track.demo, console)
    resolved_device = detect_device() if device == "auto" else device
    spec = RunSpec(
        run_id=new_run_id(model, seed),  # known here: an interrupted run's result is found
        track=the_track,
        model=model,
        seed=seed,
        agent=the_agent,
        exam=exam_path,
        public_set=public,
        data_dir=data_dir,
        results_dir=results_dir,
        backend=backend,
        device=resolved_device.partition(":")[0],
        # A run on a GPU pins its runner and grading to one: N of cuda:N, else the host's first.
        gpu=resolved_device.partition(":")[2] or default_gpu(resolved_device),
        cpus=cpus,
        effort=effort,
        budget_s=budget_s,
        per_call_limit_s=per_call,
        reserved_s=reserved,
        secrets=env_secrets(),
        image_digests=image_digests,
    )
    progress, echo, tick = run_progress(console, spec.budget[0], quiet)

    # SIGTERM ends the run like Ctrl-C: everything is stopped and the run recorded as invalid.
    signal.signal(signal.SIGTERM, raise_interrupted)
    try:
        with progress:
            # The final grading's steps on this terminal only (its minutes were silent).
            said = grading_lines(lambda line: console.print(line, markup=False, highlight=False))
            result = execute_run(spec, echo=echo, tick=tick, grading_progress=said)
    except (WorkspaceError, RuntimeError, DataError) as exc:
        raise click.ClickException(str(exc)) from exc
    except (KeyboardInterrupt, Interrupted) as exc:
        # The run's own terminal says why it stopped (`runs kill`, SIGTERM, Ctrl-C), with the
        # result it recorded; then exit as a process stopped by that signal does (Ctrl-C: 130),
        # so that a script running the run (`make demo`) stops too.
        say_interrupted(results_dir / the_track.id / f"{spec.run_id}.json", console)
        state.discard_run(spec.run_id or "")  # recorded: its workspace goes, as after an end
        raise SystemExit(130 if isinstance(exc, KeyboardInterrupt) else exc.code) from None
    finally:
        state.remove_tree(data_dir)  # the workspace holds its own copy
    # The result and its artifacts are in the results folder: the workspace is not needed.
    state.discard_run(result.run_id)
    path = results_dir / result.track / f"{result.run_id}.json"
    print_result(result, path, make_console(steady=True))
    note_untrusted_key(path, results_dir, console)
    warn_if_in_worktree(results_dir, the_track.id, the_track.demo, console)
    if result.status == "invalid":
        raise SystemExit(1)
