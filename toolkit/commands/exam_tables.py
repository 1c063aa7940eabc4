"""The exam's quality report as tables for the terminal (`toolkit build-exam`, `verify-exam`):
per family, the reference solver, the baselines, the generic solvers, the chance floor and the
private pool, each with the limit the gate holds it to.
"""

from __future__ import annotations

from rich.table import Table

from exam_builder.learnability import (
    EXAM_FLOOR,
    GATED_SCALE,
    TIER1_FLOOR,
    budget_words,
    draws_words,
)
from exam_builder.manifest import Manifest
from exam_builder.quality import GENERIC_LIMIT, FamilyQuality


def pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def quality_table(manifest: Manifest) -> Table:
    """The per-family quality report as a rich table, each family's tiers below it."""
    report = manifest.quality
    table = Table(
        title="Quality report (percent exact)", title_justify="left", caption_justify="left"
    )
    columns: tuple[str, ...] = ("family", "questions", "reference", "baseline", "copy")
    columns += ("public engine", "generic", "chance", "pool")
    for name in (*columns, "longest prompt"):
        family = name == "family"  # never wrapped: the narrow terminal squeezes the numbers
        table.add_column(name, justify="left" if family else "right", no_wrap=family)

    def add(name: str, fq: FamilyQuality, style: str | None = None) -> None:
        table.add_row(
            name,
            str(fq.questions),
            pct(fq.reference),
            pct(fq.baseline),
            pct(fq.copy_),
            pct(fq.public_engine),
            pct(fq.generic_any),
            pct(fq.chance),
            pct(fq.pool),
            f"{fq.max_prompt_bytes} B",
            style=style,
        )

    for name, fq in report.families.items():
        add(name, fq)
        for tier, tq in sorted((fq.tiers or {}).items()):  # the manifest's tier rows, too
            add(f"  tier {tier}", tq, "dim")
    table.add_section()
    add("all", report.total)
    table.caption = (
        f"Solvers see each prompt's last {report.context_bytes} bytes. reference: the family's "
        "own solver (must be 100); baseline: "
        + (report.baseline.kind + " of English text" if report.baseline else "not run")
        + " (must be <= 5); copy: longest earlier match continued; public engine: the "
        "built-in solvers with default parameters ("
        + ("public bank: not gated" if report.public_bank else "must be <= 5")
        + "); generic: some generic solver (the best per question; table below); chance: "
        "the blind guesser's floor, its best strategy picking among the prompt's values of the "
        "answer's shape ("
        + (
            "public bank: not gated"
            if report.public_bank or report.chance_limit is None
            else f"must be <= {report.chance_limit:g}"
        )
        + "; the exam's floor is the 'all' row); pool: "
        + (
            "no private pool was run (the bank's solvers/ folder, or --pool DIR)."
            if not report.pool_solvers
            else f"the best of {report.pool_solvers} private pool solvers ("
            + ("public bank: not gated" if report.public_bank else f"must be <= {GENERIC_LIMIT:g}")
            + ")."
        )
    )
    return table


def generic_table(manifest: Manifest) -> Table | None:
    """Generic solver x family (percent exact), the table the generic gate reads; None when
    the manifest predates the generic solvers."""
    report = manifest.quality
    if not report.generic_solvers:
        return None
    table = Table(
        title="Generic model-free solvers (percent exact)",
        title_justify="left",
        caption_justify="left",
    )
    table.add_column("solver", no_wrap=True)
    for name in report.families:
        table.add_column(name, justify="right")
    table.add_column("structure it reads")
    for solver, structure in report.generic_solvers.items():
        cells = []
        for fq in report.families.values():
            value = fq.generic.get(solver)
            text = pct(value)
            cells.append(
                f"[bold]{text}[/bold]" if value is not None and value > GENERIC_LIMIT else text
            )
        table.add_row(solver, *cells, structure)
    table.caption = (
        "Each solver reads the prompt's structure, not its wording, and guesses without the "
        "answer's length (right when its guess starts with the answer). "
        + (
            "Public bank: not gated."
            if report.public_bank
            else f"Each must be <= {GENERIC_LIMIT:g} per family (bold: above)."
        )
    )
    return table


def model_free_best(fq: FamilyQuality, public_bank: bool) -> float:
    """The best model-free score of a family (or tier): the blind guesser's floor, the oracle
    of the generic solvers, the private pool, the English baseline, copying and (for a bank
    that is not public) the public engine."""
    values = [fq.chance, fq.generic_any, fq.pool, fq.baseline, fq.copy_]
    if not public_bank:
        values.append(fq.public_engine)
    return max((v for v in values if v is not None), default=0.0)


def both_sides_table(manifest: Manifest) -> Table | None:
    """The gate's two sides per family and tier: the best model-free score beside the
    reference learner's; None when the build did not run the learner."""
    learned = manifest.learnability
    if learned is None:
        return None
    report = manifest.quality
    table = Table(
        title=f"Both sides of the gate (percent exact; learner: {learned.scale} scale, "
        f"{budget_words(learned)}{draws_words(learned.draws)})",
        title_justify="left",
        caption_justify="left",
    )
    side = manifest.public_learnability
    columns = ["family", "tier", "questions", "model-free best", "reference learner"]
    columns += [] if side is None else ["public-side learner"]
    for name in columns:
        table.add_column(name, justify="left" if name == "family" else "right", no_wrap=True)
    tables = [learned] + ([] if side is None else [side])
    rows = [{(r.family, r.tier): r for r in t.rows} for t in tables]
    for name, fq in report.families.items():
        for tier, tq in (fq.tiers or {}).items():
            cells = []
            for found in rows:
                row = found.get((name, tier))
                cells.append(
                    "—" if row is None else f"{row.percent:.1f} ({row.passed}/{row.total})"
                )
            free = pct(model_free_best(tq, report.public_bank))
            table.add_row(name, str(tier), str(tq.questions), free, *cells)
    table.add_section()
    free = pct(model_free_best(report.total, report.public_bank))
    totals = [f"{t.total.percent:.1f}" for t in tables]
    table.add_row("all", "all", str(report.total.questions), free, *totals)
    table.caption = (
        f"model-free best: the highest of chance, generic, pool, baseline, copy"
        f"{'' if report.public_bank else ' and public engine'} (must stay near 0); reference "
        f"learner: the starter's model trained on the family's own format (at the "
        f"{GATED_SCALE} scale, for a bank that is not public: tier 1 at least "
        f"{TIER1_FLOOR:g} in every family, the exam at least {EXAM_FLOOR:g})"
        + (
            ""
            if side is None
            else "; public-side learner: trained only on a public bank's generators, every "
            "register parameter drawn per document (measured, not gated)"
        )
        + "."
    )
    return table
