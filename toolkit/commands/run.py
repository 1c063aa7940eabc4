"""`toolkit run` (one agent run under a track's rules) and `toolkit runs` (recover, validate,
clean, schema).

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
from toolkit.agents.relay_budget import limits_for
from toolkit.agents.scripted import BASELINE_MODEL
from toolkit.campaign.claims import Claims, holder
from toolkit.campaign.plan import RunKey
from toolkit.chain import ChainError, read_chain
from toolkit.commands.console import make_console
from toolkit.commands.doctor import preflight
from toolkit.commands.images import images_option, use_docker_images
from toolkit.commands.options import (
    cpus_option,
    find_registry,
    keys_option,
    registry_option,
    results_dir_option,
)
from toolkit.data import WARN_NOT_TEXT_SHARE, DataError, load_prepared
from toolkit.paths import state_dir
from toolkit.registry import carry_track
from toolkit.results import ResultsError, RunResult, json_schema, load_run
from toolkit.run.artifacts import AUDIT_FILE, check_files
from toolkit.run.history import HISTORY_FILE, check_against
from toolkit.run.inputs import InputError, check_public_set, prepare_data, public_set, resolve_exam
from toolkit.run.interrupt import Interrupted
from toolkit.run.orchestrate import RunSpec, execute_run
from toolkit.run.recovery import recover_runs
from toolkit.run.roles import detect_device
from toolkit.run.verify import check_logs, verify_run
from toolkit.run.workspace import WorkspaceError
from toolkit.sandbox import BACKENDS
from toolkit.signing import (
    Keyring,
    SigningError,
    Verdict,
    check,
    keyring_path,
    load_keyring,
    local_key,
    trusted_keyring,
)
from toolkit.stats import results_problems
from toolkit.stats.loading import signature_problem
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
    "--track", default="demo-cpu", show_default=True, help="Track id (results/tracks.json)."
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
@click.option(
    "--device",
    type=click.Choice(["auto", "cpu", "cuda"]),
    default="auto",
    show_default=True,
    help="Device for grading (training picks its own inside the runner).",
)
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
      toolkit run --agent scripted --backend local --track demo-cpu --seed 0 \\
          --results /tmp/ari-results
      OPENAI_API_KEY=... toolkit run --agent opencode --provider openai --model gpt-5 \\
          --effort high --track demo-cpu --seed 0 --results /tmp/ari-results
    """
    console = make_console(stderr=True)
    model = _model_for(agent, model)
    try:
        local_key()  # the result will be signed: a key that cannot sign stops the run now
    except SigningError as exc:
        raise click.UsageError(str(exc)) from exc
    registry_dir = find_registry(results_dir, registry)
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
    preflight(the_track, backend)  # before any work: a track this host cannot run is refused
    # Then the provider: one tiny call with the run's key, endpoint and model, before anything
    # is prepared or written and before the clock (a bad key costs seconds, not the budget).
    provider_problem = the_agent.preflight()
    if provider_problem is not None:
        raise click.ClickException(provider_problem)
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
        device=detect_device() if device == "auto" else device,
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
        verdict = _Keyrings(None).check(path)
    except (OSError, SigningError) as exc:
        console.print(f"[bold yellow]note:[/bold yellow] cannot check the signature: {exc}")
        return
    if not verdict.verified:
        console.print(
            f"[bold yellow]note:[/bold yellow] {verdict.reason}: readers of {results_dir} will "
            "see this run as unverified unless they pin this machine's key (toolkit keys pin)"
        )


class _Keyrings:
    """What each result file is checked against: the pinned keys (`toolkit.signing`; with
    --keys, that list too), and its folder's signing_keys.json as a hint only."""

    def __init__(self, keys_file: Path | None) -> None:
        self.extra = (keys_file,) if keys_file else ()
        self.loaded: dict[Path, tuple[Keyring, Keyring]] = {}

    def of(self, result_file: Path) -> tuple[Keyring, Keyring]:
        """(trusted, the folder's own list) for `result_file`."""
        path = keyring_path(result_file.parent.parent)
        if path not in self.loaded:
            folder = load_keyring(path)
            self.loaded[path] = (trusted_keyring(self.extra), folder)
        return self.loaded[path]

    def check(self, result_file: Path) -> Verdict:
        trusted, folder = self.of(result_file)
        return check(result_file.read_bytes(), trusted, folder)


@click.group("runs")
def runs_group() -> None:
    """Look after run results: recover interrupted runs, validate or verify results, schema.

    \b
    Example:
      toolkit runs validate results/
    """


@runs_group.command("recover")
def recover_command() -> None:
    """Record every run whose harness died (e.g. kill -9) as invalid, with its reason.

    `toolkit run` does this too before it starts. Docker containers and networks left by a
    harness that is gone are removed. The audit log and the submission history of
    such a run are kept as they were; leftover agent processes are killed.

    \b
    Example:
      toolkit runs recover
    """
    written = recover_runs()
    for path in written:
        click.echo(f"recorded as invalid: {path}")
        listed = load_run(path).artifacts
        click.echo(f"  artifacts kept: {', '.join(sorted(listed)) or 'none'}")
    if not written:
        click.echo("no interrupted runs")
    from toolkit.sandbox.docker.engine import remove_leftovers

    removed = remove_leftovers()  # containers of any harness that is gone (none: no engine)
    if removed:
        click.echo(f"removed {len(removed)} leftover Docker containers and networks")


def _result_files(paths: tuple[Path, ...]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += sorted(p for p in path.glob("*/*.json") if p.is_file())
        else:
            files.append(path)
    return files


@runs_group.command("validate")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@keys_option()
def validate_command(paths: tuple[Path, ...], keys_file: Path | None) -> None:
    """Check result files against the run model, their histories and their signatures.

    PATHS are result files or results folders (every <track>/<run_id>.json inside). Errors name
    the file and the field; the exit status is 1 if any file is bad. A file whose signature does
    not verify under a pinned key (the toolkit's pinned_keys.json, $ARI_TRUSTED_KEYS, --keys,
    this machine's key; never the folder's own signing_keys.json) is bad: unsigned, signed by
    a key nobody pinned, or changed since it was signed. A file that
    pinned list names as written before signing, unchanged, passes as unverified.

    \b
    Example:
      toolkit runs validate results/
    """
    bad = 0
    reported: set[str] = set()  # each problem once, however many checks find it
    files = _result_files(paths)
    keyrings = _Keyrings(keys_file)
    for file in files:
        try:
            result = load_run(file)
            history = file.parent / result.run_id / HISTORY_FILE
            if history.is_file():
                check_against(history, result)
            audit = file.parent / result.run_id / AUDIT_FILE
            read_chain(audit)  # an absent audit log reads as empty
            # The logs still end where the result recorded (a rewrite with fresh hashes).
            for problem in check_logs(file, result):
                raise ChainError(f"{file}: {problem}")
            # Every file of the run folder as the signed result hashed it.
            changed, notes = check_files(file, result)
            for problem in changed:
                raise ResultsError(f"{file}: {problem}")
            verdict = keyrings.check(file)
            if not verdict.verified and not verdict.listed_unsigned:
                raise ResultsError(signature_problem(file, verdict.reason or ""))
        except (ResultsError, ChainError, SigningError, OSError) as exc:
            click.echo(f"error: {exc}", err=True)
            reported.add(str(exc))
            bad += 1
            continue
        flag = f"; unverified: {verdict.reason}" if not verdict.verified else ""
        flag += "".join(f"; {note}" for note in notes)
        click.echo(f"ok: {file} ({result.status}, {result.score.percent:.1f}%{flag})")
    # A results folder with its registry is also checked the way the site reads it (tracks,
    # protocol fixes, totals, artifacts, duplicates, signatures): what passes here builds.
    for folder in (p for p in paths if p.is_dir() and (p / "tracks.json").is_file()):
        try:
            keyring = trusted_keyring((keys_file,) if keys_file else ())
            problems = results_problems(folder, keyring)
        except SigningError as exc:
            problems = [str(exc)]
        for problem in problems:
            if problem not in reported:
                click.echo(f"error: {problem}", err=True)
                reported.add(problem)
                bad += 1
    if not files:
        click.echo("no result files found", err=True)
    if bad or not files:
        raise SystemExit(1)


@runs_group.command("verify")
@click.argument("result_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--exam",
    required=True,
    type=click.Path(exists=True, path_type=Path),
    help="The exam the run was graded on (exam.jsonl or its folder).",
)
@click.option(
    "--backend",
    type=click.Choice(BACKENDS),
    default="local",
    show_default=True,
    help="Sandbox backend of the re-grade.",
)
@click.option("--device", default=None, help="Device of the re-grade (default: the run's).")
@keys_option()
def verify_command(
    result_file: Path, exam: Path, backend: str, device: str | None, keys_file: Path | None
) -> None:
    """Check a published result against its signature and artifacts: re-grade its archive.

    Checks that the file is signed by a pinned key (as `runs validate`: never one the folder
    lists for itself), that the audit log and the history end where the result recorded, that
    EXAM is the run's exam (SHA-256), that the stored archive of the promoted candidate
    (<results>/<track>/<run_id>/candidates/<id>.tar.gz) is the one promoted, and that grading
    it again gives the result's status, score, per-family counts and bits per byte. Every
    result with a promoted candidate is re-graded, whatever its status says. Exit status 0
    when everything matches, 1 with one line per mismatch. This is how a maintainer checks a
    submitted result.

    \b
    Example:
      toolkit runs verify results/v1-h100-1h/RUN_ID.json --exam ~/secure/exams/v1/exam.jsonl
    """
    try:
        result = load_run(result_file)
        verdict = _Keyrings(keys_file).check(result_file)
    except (ResultsError, SigningError) as exc:
        raise click.UsageError(str(exc)) from exc
    signature: list[str] = []
    if not verdict.verified and not verdict.listed_unsigned:
        signature.append(f"signature: {verdict.reason}")
    try:
        problems, report = verify_run(
            result_file, result, exam, backend=backend, device=device, progress=True
        )
    except ExamFileError as exc:
        raise click.UsageError(f"{exc} (pass --exam with the run's exam.jsonl)") from exc
    problems = signature + problems
    for problem in problems:
        click.echo(f"mismatch: {problem}")
    if problems:
        raise SystemExit(1)
    what = (
        f"re-graded {result.promoted.id if result.promoted else ''}: "
        f"{report.score.passed}/{report.score.total}"
        if report is not None
        else f"nothing to re-grade ({result.status}, no promoted candidate)"
    )
    signed = "signature holds" if verdict.verified else f"unverified: {verdict.reason}"
    click.echo(f"ok: {result_file} ({result.status}; {what}; {signed}; logs and hashes match)")


def _bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB"):
        if size < 1000:
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1000
    return f"{size:,.1f} GB"


@runs_group.command("clean")
@click.option("--dry-run", is_flag=True, help="Only list what would be removed.")
@click.option(
    "--caches",
    is_flag=True,
    help="Also remove the caches (built public exams, extracted corpus); never while a run runs.",
)
def clean_command(dry_run: bool, caches: bool) -> None:
    """Remove what finished runs left in the state folder ($ARI_HOME).

    A finished run's workspace and harness folder, and prepared training data whose command is
    gone (a start that failed, a killed `toolkit run`), are removed; a run in progress, or one
    whose harness died and is not yet recovered (`toolkit runs recover`), is never touched.
    Results live in the results folder and are never touched either.

    \b
    Example:
      toolkit runs clean --dry-run
    """
    found = state.clean(caches=caches, dry_run=dry_run)
    freed = 0
    for item in found:
        if item.removable:
            freed += item.size
            verb = "would remove" if dry_run else "removed"
        else:
            verb = "kept"
        click.echo(f"{verb}: {item.path} ({item.what}, {_bytes(item.size)}; {item.reason})")
    total = sum(1 for i in found if i.removable)
    done = "would free" if dry_run else "freed"
    click.echo(f"{total} item(s), {done} {_bytes(freed)} in {state_dir()}")


@runs_group.command("schema")
def schema_command() -> None:
    """Print the JSON Schema of a result file (also in toolkit/schemas/run.schema.json).

    \b
    Example:
      toolkit runs schema > run.schema.json
    """
    click.echo(json_schema(), nl=False)
