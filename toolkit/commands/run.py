"""`toolkit run`: one agent run under a track's rules (`toolkit runs`: commands/runs.py).

Exit status: 0 when the run ended `valid` or `failed` (a failed run is a result: it scores 0);
1 when it ended `invalid` (infrastructure failure: rerun it); 2 for usage errors.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from exam_builder.exam_file import ExamFileError
from toolkit import state
from toolkit.agents import AGENTS, AgentSetupError, get_agent
from toolkit.agents.providers import cost_cap_check, cost_cap_note
from toolkit.agents.relay_budget import limits_for
from toolkit.agents.scripted import BASELINE_MODEL
from toolkit.campaign.claims import Claims, holder
from toolkit.campaign.plan import RunKey
from toolkit.commands.console import make_console
from toolkit.commands.doctor import preflight
from toolkit.commands.images import images_option, use_docker_images
from toolkit.commands.options import (
    Refused,
    cpus_option,
    device_option,
    find_registry,
    refuse_device,
    registry_option,
    results_dir_option,
)
from toolkit.data import WARN_NOT_TEXT_SHARE, DataError, check_source, load_prepared
from toolkit.registry import carry_track
from toolkit.results import RunResult
from toolkit.run.inputs import InputError, check_public_set, prepare_data, public_set, resolve_exam
from toolkit.run.interrupt import Interrupted
from toolkit.run.orchestrate import RunSpec, execute_run
from toolkit.run.recovery import recover_runs
from toolkit.run.roles import default_gpu, detect_device
from toolkit.run.workspace import WorkspaceError
from toolkit.sandbox import BACKENDS
from toolkit.signing import (
    SigningError,
    check,
    keyring_path,
    load_keyring,
    local_key,
    trusted_keyring,
)
from toolkit.tracks import RegistryError, Track, get_track

# Environment variables whose values must never reach the agent's workspace (checked there).
SECRET_ENV_SUFFIXES = ("_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD")


def _secrets() -> list[str]:
    return [v for k, v in os.environ.items() if k.endswith(SECRET_ENV_SUFFIXES) and v]


def _terminate(signum: int, _frame: object) -> None:
    raise Interrupted(signal.Signals(signum).name, 128 + signum)


def print_result(result: RunResult, path: Path, console: Console) -> None:
    colour = {"valid": "green", "failed": "yellow", "invalid": "red"}[result.status]
    s = result.score
    console.print(
        f"[bold {colour}]{result.status}[/bold {colour}] · score {s.percent:.1f}% "
        f"({s.passed}/{s.total}) · bpb "
        f"{'—' if result.bits_per_byte is None else f'{result.bits_per_byte:.4f}'}"
    )
    if result.status_reason:
        console.print(f"reason: {result.status_reason}")
    if result.weights_ablation is not None:
        a = result.weights_ablation
        suspect = " · model-free suspect" if result.model_free_suspect else ""
        console.print(f"weights ablation: {a.passed}/{a.total}{suspect}")
    promoted = result.promoted.id if result.promoted else "none"
    public = result.best_public_score
    console.print(
        f"candidates {len(result.candidates)} · promoted {promoted} · best public "
        f"{'—' if public is None else f'{public:.1f}%'} · used {result.timings.used_s:.0f}s of "
        f"{result.timings.budget_s:.0f}s"
    )
    console.print(f"result: {path.resolve()}")


def git_worktree_of(path: Path) -> Path | None:
    """The git working tree that `path` lies in (its top folder), or None."""
    for folder in [path.resolve(), *path.resolve().parents]:
        if (folder / ".git").exists():
            return folder
    return None


def _git_ignored(tree: Path, path: Path) -> bool:
    """Whether git ignores `path` in `tree` (False when git cannot tell: then we warn)."""
    try:
        done = subprocess.run(
            ["git", "-C", str(tree), "check-ignore", "-q", str(path)],
            capture_output=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def warn_if_in_worktree(results_dir: Path, track: Track, console: Console) -> None:
    """A run written into a git working tree (the repository's committed results/, say) is one
    `git add` away from being published: say so, loudly, with where it went. A folder git
    ignores (`make demo` writes under .ari/) is not."""
    tree = git_worktree_of(results_dir)
    where = (results_dir / track.id).resolve()
    if tree is None or _git_ignored(tree, where):
        return
    kind = "demo-track " if track.demo else ""
    console.print(
        f"[bold yellow]note:[/bold yellow] this {kind}run is written into the git working tree "
        f"{tree}, at {where}: commit it only to publish it; for a try-out pass a scratch folder "
        "(--results /tmp/ari-results)"
    )


def _refuse_stray_results(results_dir: Path) -> None:
    """`--results` left out (and no ARI_RESULTS_DIR) where ./results does not exist: a run
    would silently make a results folder in whatever folder the operator stands in."""
    source = click.get_current_context().get_parameter_source("results_dir")
    if source == click.core.ParameterSource.DEFAULT and not results_dir.is_dir():
        raise Refused(
            f"no results folder here ({Path.cwd() / results_dir} does not exist): pass "
            "--results DIR (a scratch folder for a try-out: --results /tmp/ari-results), or "
            "run from the checkout"
        )


def _model_for(agent: str, model: str | None) -> str:
    """The row's model name: the scripted agent's is fixed (it uses no model)."""
    if agent == "scripted":
        if model not in (None, BASELINE_MODEL):
            raise click.UsageError(
                f"--agent scripted uses no model, so its runs are recorded as "
                f"'{BASELINE_MODEL}': leave --model out (got '{model}')"
            )
        return BASELINE_MODEL
    if not model:
        raise click.UsageError(f"--agent {agent} needs --model (the model under test)")
    return model


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
    "--track", default="demo-cpu-2", show_default=True, help="Track id (results/tracks.json)."
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
      toolkit run --agent scripted --backend local --track demo-cpu-2 --seed 0 \\
          --results /tmp/ari-results
      OPENAI_API_KEY=... toolkit run --agent opencode --provider openai --model gpt-5 \\
          --effort high --track demo-cpu-2 --seed 0 --results /tmp/ari-results
    """
    console = make_console(stderr=True)
    refuse_device(device, backend)  # a GPU this host cannot use: refused before any work
    _refuse_stray_results(results_dir)
    model = _model_for(agent, model)
    try:
        local_key()  # the result will be signed: a key that cannot sign stops the run now
    except SigningError as exc:
        raise click.UsageError(str(exc)) from exc
    registry_dir = find_registry(results_dir, registry, track)
    try:
        the_track = get_track(registry_dir, track)
    except RegistryError as exc:
        raise click.UsageError(str(exc)) from exc
    budget_s = per_call = reserved = None
    if budget is not None:
        if not the_track.demo:
            raise click.UsageError(
                f"--budget is for trying things out: track '{track}' is official and its "
                "budget is part of what it freezes"
            )
        scale = budget / the_track.budget_s
        budget_s, per_call = budget, min(budget, the_track.per_call_limit_s * scale)
        reserved = the_track.reserved_s * scale
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
    note = None if max_cost_usd else cost_cap_note(entry, the_track.max_cost_usd)
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
    claims = Claims(results_dir)
    key = RunKey(the_track.id, model, effort, seed)
    # Let go however the command ends (a test's CliRunner runs many in one process, and a
    # claim left open would refuse the next run of the key).
    click.get_current_context().call_on_close(claims.release_all)
    if not claims.claim(key):
        who = holder(results_dir, key) or "another process"
        raise click.ClickException(
            f"a run of {key.label()} on track '{the_track.id}' is already going on in "
            f"{results_dir} (held by {who}); wait for it to end, or use another seed"
        )
    image_digests = None
    if backend == "docker":
        found = use_docker_images(images_file)
        image_digests = {role: found[role].digest for role in ("controller", "runner", "grader")}
    elif images_file is not None:
        raise click.UsageError("--images pins Docker images: use it with --backend docker")
    for path in recover_runs():
        console.print(f"[yellow]recorded an interrupted run as invalid: {path}[/yellow]")
    data_dir: Path | None = None
    try:
        exam_path = resolve_exam(the_track, exam)
        public = public_set()
        check_public_set(the_track, public)
        data_dir = state.new_data_dir()
        console.print("preparing the training data...")
        prepare_data(train_data, data_dir)
        data = load_prepared(data_dir)
        console.print(
            f"training data: {data.train_bytes:,} bytes (sha256 {data.train_sha256[:12]}...), "
            f"validation {data.val_bytes:,} bytes (sha256 {data.val_sha256[:12]}...)"
        )
        if data.not_text_share > WARN_NOT_TEXT_SHARE:
            console.print(
                f"[bold yellow]warning:[/bold yellow] {100 * data.not_text_share:.1f}% of the "
                "training bytes are not text (invalid UTF-8 or control characters); recorded "
                "with the run"
            )
        mismatch = the_track.train_data_mismatch(data.train_sha256, data.val_sha256)
        if mismatch:
            raise InputError(
                f"{train_data or 'the default corpus'}: not the training data of track "
                f"'{the_track.id}' ({mismatch}); pass the track's training text with --train-data"
            )
    except (InputError, ExamFileError, DataError) as exc:
        if data_dir is not None:
            state.remove_tree(data_dir)  # nothing of a failed start stays in $ARI_HOME
        raise click.UsageError(str(exc)) from exc
    warn_if_in_worktree(results_dir, the_track, console)
    resolved_device = detect_device() if device == "auto" else device
    spec = RunSpec(
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
        secrets=_secrets(),
        image_digests=image_digests,
    )
    progress = Progress(
        TextColumn("[bold]run[/bold]"),
        BarColumn(),
        TextColumn("{task.completed:.0f}/{task.total:.0f}s"),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    )
    task = progress.add_task("run", total=spec.budget[0])

    def echo(line: str) -> None:
        if not quiet:
            progress.console.print(line, markup=False, highlight=False)

    def tick(elapsed: float, total: float) -> None:
        progress.update(task, completed=min(elapsed, total))

    # SIGTERM ends the run like Ctrl-C: everything is stopped and the run recorded as invalid.
    signal.signal(signal.SIGTERM, _terminate)
    try:
        with progress:
            result = execute_run(spec, echo=echo, tick=tick)
    except (WorkspaceError, RuntimeError, DataError) as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        state.remove_tree(data_dir)  # the workspace holds its own copy
    # The result and its artifacts are in the results folder: the workspace is not needed.
    state.discard_run(result.run_id)
    path = results_dir / result.track / f"{result.run_id}.json"
    print_result(result, path, make_console())
    _note_untrusted_key(path, results_dir, console)
    warn_if_in_worktree(results_dir, the_track, console)
    if result.status == "invalid":
        raise SystemExit(1)


def _note_untrusted_key(path: Path, results_dir: Path, console: Console) -> None:
    """The run is signed; say so when no pinned key accepts the signature."""
    try:
        folder = load_keyring(keyring_path(results_dir))
        verdict = check(path.read_bytes(), trusted_keyring(()), folder)
    except (OSError, SigningError) as exc:
        console.print(f"[bold yellow]note:[/bold yellow] cannot check the signature: {exc}")
        return
    if not verdict.verified:
        console.print(
            f"[bold yellow]note:[/bold yellow] {verdict.reason}: readers of {results_dir} will "
            "see this run as unverified unless they pin this machine's key (toolkit keys pin)"
        )
