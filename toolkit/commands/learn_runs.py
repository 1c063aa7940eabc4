"""The learners' runs as the commands show them: a progress bar per family, the table.

`toolkit learn-exam` (`learn.py`) and `toolkit build-exam --learn` (`exam.py`) both run the
learners through `run_learner`; `learn_table` draws the table they print.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from exam_builder.bank import Bank, load_bank
from exam_builder.build import Learned, PreparedExam
from exam_builder.exam_file import Question
from exam_builder.learnability import LearnReport, LearnRow, budget_words, draws_words
from toolkit.learn.reference import learn_family, report_of
from toolkit.learn.scale import Scale


def learn_table(report: LearnReport) -> Table:
    """The learnability table: a row per family and tier, then the totals."""
    table = Table(
        title=f"{LEARNERS[report.learner]} ({report.scale} scale: {report.model}, "
        f"{budget_words(report)} on {report.device}"
        + (f", seed {report.seed}" if report.seed else "")
        + draws_words(report.draws)
        + ")",
        title_justify="left",
        caption_justify="left",
    )
    for name in ("family", "tier", "questions", "passed", "percent", "steps", "bytes seen"):
        table.add_column(name, justify="left" if name == "family" else "right", no_wrap=True)
    for name in ("final loss", "seconds"):
        table.add_column(name, justify="right")
    if report.draws > 1:
        table.add_column("draw kept (held-out passed per draw)", justify="left")

    def add(r: LearnRow) -> None:
        loss = "—" if r.final_loss is None else f"{r.final_loss:.3f}"
        cells = (r.family, str(r.tier), str(r.total), str(r.passed), f"{r.percent:.1f}")
        steps = f"{r.steps:,}" + (" (cut)" if r.cut else "")
        kept = [] if report.draws == 1 else [_draw_words(r)]
        table.add_row(*cells, steps, f"{r.bytes_seen:,}", loss, f"{r.seconds:.0f}", *kept)

    for row in report.rows:
        add(row)
    table.add_section()
    for tier, t in report.tiers.items():
        table.add_row("all", tier, str(t.total), str(t.passed), f"{t.percent:.1f}")
    t = report.total
    table.add_row("all", "all", str(t.total), str(t.passed), f"{t.percent:.1f}")
    trained = (
        "a public bank's generator with every register parameter drawn per document (never "
        "the exam's bank)"
        if report.learner == "public-side"
        else "in-format text that the family's generator made from seeds the exam does not use"
    )
    table.caption = (
        f"Each family's model is the starter's, trained only on {trained}, then graded by the "
        "real grader on the family's questions (exact match). (cut): a cap in seconds stopped "
        "it before its steps."
        + (
            f" With {report.draws} draws a family, the model kept is the one that passed most "
            "held-out questions of its own training text's generator (never the exam)."
            if report.draws > 1
            else ""
        )
    )
    return table


def _draw_words(row: LearnRow) -> str:
    """`seed 1 (3, 9 of 24)`: the draw kept and what each draw passed held out."""
    if row.draw is None or row.held_out is None:
        return "—"
    scores = ", ".join(str(n) for n in row.held_out)
    return f"seed {row.draw} ({scores} of {row.held_out_total})"


LEARNERS = {"own-bank": "Reference learner", "public-side": "Public-side learner"}
"""The table's title per kind of learner (`LearnReport.learner`)."""


@dataclass(frozen=True)
class Budget:
    """What each family trains for: `steps`, stopped early by a cap of `seconds` (None:
    none); `seed` draws the models; `randomize` makes it the public-side learner."""

    steps: int
    seconds: float | None = None
    seed: int = 0
    randomize: bool = False
    draws: int = 1


def run_learner(
    console: Console,
    bank: Bank,
    exam: list[Question],
    exam_sha256: str,
    chosen: Scale,
    families: list[str],
    budget: Budget,
) -> LearnReport:
    """Train and grade every family in `families`, with a progress bar each."""
    columns = (
        TextColumn("{task.description:<24}"),
        BarColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
    )
    rows: list[LearnRow] = []
    with Progress(*columns, console=console, transient=True) as bar:
        for name in families:
            task = bar.add_task(name, total=budget.steps, status="training")

            def tick(elapsed: float, steps: int, loss: float, task: int = task) -> None:
                status = f"step {steps:,}, loss {loss:.3f}"
                bar.update(task, completed=steps, status=status)  # type: ignore[arg-type]

            def grading(task: int = task) -> None:
                bar.update(task, status="grading")  # type: ignore[arg-type]

            bar.update(task, status="training")
            mine = learn_family(
                bank,
                name,
                exam,
                chosen,
                steps=budget.steps,
                seconds=budget.seconds,
                randomize=budget.randomize,
                tick=tick,
                grading=grading,
                seed=budget.seed,
                draws=budget.draws,
            )
            rows += mine
            done = sum(r.passed for r in mine)
            total = sum(r.total for r in mine)
            cut = " (cut short by the cap)" if mine[0].cut else ""
            kept = f", {_draw_words(mine[0])} kept" if budget.draws > 1 else ""
            console.print(f"{name}: {done}/{total} passed after {mine[0].steps:,} steps{cut}{kept}")
    return report_of(
        rows,
        chosen,
        (budget.steps, budget.seconds),
        bank,
        exam_sha256,
        budget.seed,
        budget.randomize,
        budget.draws,
    )


def make_learner(
    console: Console,
    bank_dir: Path,
    chosen: Scale,
    budget: Budget,
    public_bank: Path | None = None,
) -> Callable[[PreparedExam], Learned]:
    """The learners as `toolkit build-exam --learn` runs them on the exam it built: the
    reference (own-bank) learner, then, with `public_bank`, the public-side learner trained
    on that bank; the manifest keeps both tables."""

    def learn(prepared: PreparedExam) -> Learned:
        bank = load_bank(bank_dir)
        exam = [Question.model_validate_json(line) for line in prepared.exam_bytes.splitlines()]
        names = list(dict.fromkeys(q.family for q in exam))
        console.print(
            f"reference learner: {len(names)} families, {budget.steps:,} steps each at the "
            f"{chosen.name} scale{draws_words(budget.draws)}"
        )
        sha = prepared.manifest.exam_sha256
        report = run_learner(console, bank, exam, sha, chosen, names, budget)
        if public_bank is None:
            return Learned(report)
        public = load_bank(public_bank)
        console.print(f"public-side learner: trained on bank {public.id}, randomized")
        side = replace(budget, randomize=True)
        return Learned(report, run_learner(console, public, exam, sha, chosen, names, side))

    return learn
