"""`toolkit learn-exam`: the reference learner's table for an exam (the gate's learnable side).

The work is `toolkit.learn`; this module adds the command line: it checks the arguments before
any training, draws a progress bar per family, prints the table and writes it as JSON.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import click

from exam_builder.bank import Bank, BankError, load_bank
from exam_builder.exam_file import EXAM_FILE, ExamFileError, Question, load_exam, sha256_file
from exam_builder.learnability import draws_words, verdict
from toolkit.commands.console import make_console
from toolkit.commands.learn_runs import Budget, learn_table, run_learner
from toolkit.learn.reference import HELD_OUT_QUESTIONS, MAX_DRAWS
from toolkit.learn.scale import CPU_STEPS, SCALES, Scale, scale
from toolkit.results.model import write_json_atomic
from toolkit.run.interrupt import raise_interrupted


def _families(bank: Bank, exam: list[Question], wanted: str | None) -> list[str]:
    """The families to learn: those asked (checked against the bank and the exam), else every
    family of the exam that the bank makes, in exam order."""
    in_exam = list(dict.fromkeys(q.family for q in exam))
    in_bank = {e.family.name for e in bank.families}
    if wanted is None:
        missing = [f for f in in_exam if f not in in_bank]
        if missing:
            raise click.UsageError(
                f"the exam has families the bank does not make: {', '.join(missing)} "
                "(is this the exam of that bank?)"
            )
        return in_exam
    names = [f.strip() for f in wanted.split(",") if f.strip()]
    for name in names:
        if name not in in_bank:
            raise click.BadParameter(
                f"{name!r} is not a family of bank {bank.id} ({', '.join(sorted(in_bank))})",
                param_hint="--families",
            )
        if name not in in_exam:
            raise click.BadParameter(
                f"the exam has no question of {name!r}", param_hint="--families"
            )
    return list(dict.fromkeys(names))


def check_scale(scale_name: str) -> Scale:
    """The scale asked for, refused before any work when this host cannot run it."""
    chosen = scale(scale_name)
    if chosen.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise click.UsageError(
                "the gpu scale needs a CUDA GPU and a CUDA build of torch (this host has "
                "none); use the cpu scale"
            )
    return chosen


def check_public(bank: Bank, exam: list[Question], hint: str) -> None:
    """The public-side learner's bank: public, and making every family of the exam."""
    if not bank.public:
        raise click.BadParameter(
            f"bank {bank.id} is not public: the public-side learner trains only on what an "
            "agent holds (a bank with `public = true`, such as exam_builder/banks/public/demo)",
            param_hint=hint,
        )
    made = {e.family.name for e in bank.families}
    missing = [f for f in dict.fromkeys(q.family for q in exam) if f not in made]
    if missing:
        raise click.BadParameter(
            f"the exam has families the public bank {bank.id} does not make: "
            f"{', '.join(missing)} (a hidden bank's own plug-ins have no public generator)",
            param_hint=hint,
        )


@click.command("learn-exam")
@click.option(
    "--bank",
    "bank_dir",
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="The bank the exam was built from (its families make the training text).",
)
@click.option(
    "--exam",
    "exam_path",
    required=True,
    type=click.Path(exists=True, path_type=Path),
    help="The exam: an exam.jsonl, or a folder holding one.",
)
@click.option(
    "--scale",
    "scale_name",
    type=click.Choice(SCALES),
    default="cpu",
    show_default=True,
    help="cpu: a small model, minutes a family on a CPU (the gate's scale); gpu: the "
    "starter's default preset on one GPU.",
)
@click.option(
    "--families",
    default=None,
    metavar="A,B",
    help="Only these families (comma-separated; default: every family of the exam).",
)
@click.option(
    "--steps",
    type=click.IntRange(min=1),
    default=None,
    help=f"Training steps per family (default: the scale's, {CPU_STEPS:,} at the cpu scale, "
    "about ten minutes a family on an idle 2-core box). The budget: the same steps, seed and "
    "bank give the same table on an idle or a loaded box.",
)
@click.option(
    "--seconds",
    type=click.FloatRange(min=1.0),
    default=None,
    help="A cap in training seconds per family (default: none). A family it stops before its "
    "steps is marked (cut) in the table, whose verdict is then 'too few steps to judge'.",
)
@click.option(
    "--randomize",
    is_flag=True,
    help="The public-side learner: train on --bank's generators (a public bank) with every "
    "register parameter drawn per document, and grade on --exam, whose own bank it never "
    "reads: what an agent that studied the public side could build.",
)
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="The models' draw (initial weights, batch windows). A look-up that crosses with one "
    "draw may not with another: a family near 0 where others pass, try another seed before "
    "changing the family.",
)
@click.option(
    "--draws",
    type=click.IntRange(min=1, max=MAX_DRAWS),
    default=1,
    show_default=True,
    help="Models trained per family (seeds --seed, --seed+1, ...): each is graded on "
    f"{HELD_OUT_QUESTIONS} held-out questions of its own training text's generator (never the "
    "exam) and only the best is graded on the exam. Costs that many trainings.",
)
@click.option(
    "--json",
    "json_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the table as JSON here (rows: family, tier, total, passed, percent...).",
)
def learn_exam_command(
    bank_dir: Path,
    exam_path: Path,
    scale_name: str,
    families: str | None,
    steps: int | None,
    seconds: float | None,
    randomize: bool,
    seed: int,
    draws: int,
    json_out: Path | None,
) -> None:
    """Train the reference learner on each family's own format and grade it on the exam.

    For every family (or those of --families) it trains a fresh starter model for a budget
    of steps on in-format text made by the family's generator from seeds the exam does not
    use (the best an agent that had the hidden bank's formats could do), exports it as a
    starter bundle, and grades that bundle with the real grader on the family's questions of
    the exam. It prints a table (family, tier, questions, passed, percent, steps, bytes seen,
    final loss, seconds) and a verdict against the gate's floors, and writes the same with
    --json. This is the learnable side of the exam's gate: an exam that no model learns ranks
    nobody, as surely as one that rules read.

    With --randomize it is the public-side learner: --bank is a public bank, whose
    generators it trains on with every register parameter drawn per document, and the
    exam's own bank is never read: what an agent holding only the public side could build.

    \b
    Examples:
      toolkit learn-exam --bank exam_builder/banks/public/demo --exam /tmp/demo-exam \\
          --json /tmp/demo-learn.json
      toolkit learn-exam --bank ~/secure/hidden-bank --exam ~/secure/exams/hidden \\
          --families records,lists --steps 500
      toolkit learn-exam --bank exam_builder/banks/public/demo --exam /tmp/demo-exam \\
          --families symbolic --seed 1
      toolkit learn-exam --randomize --bank exam_builder/banks/public/demo \\
          --exam ~/secure/exams/hidden
      toolkit learn-exam --bank exam_builder/banks/public/demo --exam /tmp/demo-exam \\
          --families symbolic --draws 2
    """
    chosen = check_scale(scale_name)
    exam_file = exam_path / EXAM_FILE if exam_path.is_dir() else exam_path
    try:
        bank = load_bank(bank_dir)
        exam = load_exam(exam_file)
    except (BankError, ExamFileError) as exc:
        raise click.UsageError(str(exc)) from exc
    if randomize:
        check_public(bank, exam, "--bank")
    names = _families(bank, exam, families)
    if json_out is not None and not os.access(json_out.parent, os.W_OK):
        raise click.UsageError(
            f"cannot write --json {json_out}: its folder does not exist or is not writable"
        )
    budget = Budget(steps or chosen.steps, seconds, seed, randomize, draws)
    # SIGTERM stops it as Ctrl-C does: its temporary folders (ari-learn-*) are removed.
    signal.signal(signal.SIGTERM, raise_interrupted)
    console = make_console()
    who = "public-side learner" if randomize else "reference learner"
    console.print(
        f"{who}: {len(names)} famil{'y' if len(names) == 1 else 'ies'} of bank "
        f"{bank.id}, {budget.steps:,} steps each at the {chosen.name} scale"
        + (f" (cap {seconds:g} s)" if seconds is not None else "")
        + (f", seed {seed}" if seed else "")
        + draws_words(draws)
    )
    try:
        sha = sha256_file(exam_file)
        report = run_learner(console, bank, exam, sha, chosen, names, budget)
    except BankError as exc:
        raise click.ClickException(str(exc)) from exc
    console.print(learn_table(report))
    console.print(verdict(report, public_bank=bank.public and not randomize))
    if json_out is not None:
        write_json_atomic(json_out, report.model_dump_json(indent=2) + "\n")
        console.print(f"table written to {json_out}")
