"""`toolkit build-exam`: make an exam from a bank (`verify_exam.py` checks one by hash).

The engine is `exam_builder` (which knows nothing of the toolkit); this module only adds the
command line: it loads the English text for the quality report's context-free baseline (the
default corpus unless `--train-data` says otherwise), prints the report, and turns the engine's
one-line errors into clean exits.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from exam_builder.bank import Bank, BankError, load_bank, weak_seed
from exam_builder.build import BuildError, build_exam, prepare_exam, with_learnability
from exam_builder.exam_file import EXAM_FILE, MANIFEST_FILE, SHORT_HASH
from exam_builder.manifest import Manifest
from toolkit.commands.console import make_console
from toolkit.commands.exam_tables import both_sides_table, generic_table, pct, quality_table
from toolkit.commands.learn import check_scale
from toolkit.commands.learn_runs import Budget, make_learner
from toolkit.learn.reference import MAX_DRAWS
from toolkit.learn.scale import SCALES
from toolkit.run.interrupt import raise_interrupted
from toolkit.text.corpus import CorpusError, default_corpus

GATE_DRAWS = 2
"""The learnable side's draws a family by default: one draw of the cpu scale proved a lottery
on a named register (the `eight` bank's extraction wording, 2,000 steps: seeds 0, 1 and 2
passed 1, 35 and 40 of 40; site/docs/maintainers/exams.md)."""


def _english_text(train_data: Path | None) -> bytes:
    if train_data is not None:
        return train_data.read_bytes()
    try:
        return default_corpus()
    except CorpusError as exc:
        raise click.ClickException(f"{exc} (the quality report's baseline needs it)") from exc


@contextmanager
def _progress_bars(console: Console) -> Iterator[Callable[[str, int, int], None]]:
    """A `progress(stage, done, total)` callback drawing one rich bar per stage."""
    columns = (
        TextColumn("{task.description:<28}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    labels = {"generate": "generating questions", "quality": "scoring (quality report)"}
    with Progress(*columns, console=console, transient=True) as bar:
        tasks: dict[str, TaskID] = {}

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(labels.get(stage, stage), total=total)
            bar.update(tasks[stage], completed=done)

        yield progress


def _summary(console: Console, manifest: Manifest) -> None:
    console.print(quality_table(manifest))
    generic = generic_table(manifest)
    if generic is not None:
        console.print(generic)
    sides = both_sides_table(manifest)
    if sides is not None:
        console.print(sides)
    console.print(
        f"bank {manifest.bank_id} (sha256 {manifest.bank_sha256[:SHORT_HASH]}), "
        f"builder {manifest.builder_version}, {manifest.questions} questions, "
        f"chance floor {pct(manifest.quality.chance_floor)}%"
    )


def _bank_or_usage(path: Path) -> Bank:
    """The bank at `path`, or a usage error naming what is wrong with it."""
    try:
        return load_bank(path)
    except BankError as exc:
        raise click.UsageError(str(exc)) from exc


@click.command("build-exam")
@click.option(
    "--bank",
    "bank_dir",
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Bank directory (bank.toml, optional plugins/).",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Output directory for exam.jsonl and manifest.json (must not hold an exam yet).",
)
@click.option(
    "--check",
    is_flag=True,
    help="Build in memory and print the report and hash; write nothing (no --out needed).",
)
@click.option(
    "--allow-in-repo",
    is_flag=True,
    help="Allow writing inside a git working tree (public sets and tests only).",
)
@click.option(
    "--pool",
    "pools",
    multiple=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="A folder of private pool solvers (*.py) run by the gate, besides the bank's own "
    "solvers/ folder; may be given several times.",
)
@click.option(
    "--train-data",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="English text that trains the context-free baseline (default: the default corpus).",
)
@click.option(
    "--learn",
    "learn_scale",
    type=click.Choice(SCALES),
    default=None,
    help="Also run the reference learner at this scale once the model-free gate passes "
    "(toolkit learn-exam): its table goes into the manifest and, at the cpu scale for a bank "
    "that is not public, gates the exam (tier 1 >= 50 in every family, the exam >= 15).",
)
@click.option(
    "--learn-steps",
    type=click.IntRange(min=1),
    default=None,
    help="Training steps per family for --learn (default: the scale's).",
)
@click.option(
    "--learn-seconds",
    type=click.FloatRange(min=1.0),
    default=None,
    help="A cap in training seconds per family for --learn (default: none; a family it cuts "
    "short is not judged, and the exam is refused).",
)
@click.option(
    "--learn-draws",
    type=click.IntRange(min=1, max=MAX_DRAWS),
    default=None,
    help=f"Models trained per family for --learn (toolkit learn-exam --draws; default "
    f"{GATE_DRAWS}): the one that passes most held-out questions of its own training text is "
    "graded on the exam. One draw can miss a look-up that the next one learns.",
)
@click.option(
    "--learn-public",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="With --learn, also run the public-side learner trained on this public bank "
    "(toolkit learn-exam --randomize) and print its table beside the reference learner's.",
)
def build_exam_command(
    bank_dir: Path,
    out_dir: Path | None,
    check: bool,
    allow_in_repo: bool,
    train_data: Path | None,
    pools: tuple[Path, ...],
    learn_scale: str | None,
    learn_steps: int | None,
    learn_seconds: float | None,
    learn_draws: int | None,
    learn_public: Path | None,
) -> None:
    """Build an exam (exam.jsonl + manifest.json) from a bank and print its hash and quality.

    The same bank always gives the same bytes, hence the same hash. The build refuses to
    write inside a git working tree (a hidden exam must never be committed) unless
    --allow-in-repo, refuses to overwrite an existing exam, and refuses an exam whose
    reference solver is below 100% or whose English baseline is above 5% on any family;
    for a bank that is not public, also one where the public engine's solvers or any
    generic model-free solver answer more than 5% of a family (it prints that table), where
    a blind guesser's chance floor is above the bank's chance_limit (2% at most), or where a
    solver of the private pool (the bank's solvers/ folder and each --pool) answers more
    than 5% of a family.
    With --check it only reports, which is handy while editing a bank.

    \b
    Examples:
      toolkit build-exam --bank exam_builder/banks/public/demo --out /tmp/demo-exam
      toolkit build-exam --bank ~/secure/hidden-bank --check
    """
    if out_dir is None and not check:
        raise click.UsageError("pass --out DIR to write the exam, or --check to write nothing")
    console = make_console()
    _warn_weak_seed(bank_dir)
    learner = None
    if learn_scale is not None:
        # SIGTERM stops the learner as Ctrl-C does: its ari-learn-* folders are removed.
        signal.signal(signal.SIGTERM, raise_interrupted)
        chosen = check_scale(learn_scale)
        budget = Budget(learn_steps or chosen.steps, learn_seconds, draws=learn_draws or GATE_DRAWS)
        if learn_public is not None and not _bank_or_usage(learn_public).public:
            raise click.BadParameter(
                f"{learn_public} is not a public bank (`public = true`): the public-side "
                "learner trains only on what an agent holds",
                param_hint="--learn-public",
            )
        learner = make_learner(console, bank_dir, chosen, budget, learn_public)
    elif any(v is not None for v in (learn_steps, learn_seconds, learn_draws, learn_public)):
        raise click.UsageError(
            "--learn-steps, --learn-seconds, --learn-draws and --learn-public go with "
            "--learn cpu|gpu"
        )
    with console.status("Loading the English text for the baseline..."):
        english = _english_text(train_data)
    try:
        if check or out_dir is None:
            with _progress_bars(console) as progress:
                prepared = prepare_exam(
                    bank_dir, english_text=english, progress=progress, pool=pools
                )
            if learner is not None and not prepared.problems:
                prepared = with_learnability(prepared, learner)
            _summary(console, prepared.manifest)
            if prepared.problems:
                raise click.ClickException("exam refused: " + "; ".join(prepared.problems))
            manifest = prepared.manifest
            console.print("check passed; nothing written")
        else:
            with _progress_bars(console) as progress:
                manifest = build_exam(
                    bank_dir,
                    out_dir,
                    english_text=english,
                    allow_in_repo=allow_in_repo,
                    progress=progress,
                    pool=pools,
                    learn=learner,
                )
            _summary(console, manifest)
            console.print(f"wrote {out_dir / EXAM_FILE} and {MANIFEST_FILE}")
    except (BankError, BuildError) as exc:
        raise click.ClickException(str(exc)) from exc
    console.print(f"exam sha256 {manifest.exam_sha256}", soft_wrap=True)
    console.print(f"short hash  {manifest.exam_sha256[:SHORT_HASH]}")


def _warn_weak_seed(bank_dir: Path) -> None:
    """One line on stderr, before any work, when a hidden bank's seed is guessable."""
    try:
        reason = weak_seed(load_bank(bank_dir))
    except BankError as exc:
        raise click.ClickException(str(exc)) from exc
    if reason is not None:
        click.echo(f"warning: {reason}", err=True)
