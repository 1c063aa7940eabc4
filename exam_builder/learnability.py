"""The learnable side of the gate: the reference learner's table, as a manifest records it.

The model-free side (`exam_builder.quality`) proves that rules and blind guesses score nothing;
this side proves that a model can. The reference learner (`toolkit learn-exam`, which fills
these models) trains the starter's own model on in-format text that each family's generator
makes from seeds the exam never uses, and grades it with the real grader on the family's
questions. Its limits, at the `cpu` scale and for a bank that is not public: every family's
tier-1 questions at least `TIER1_FLOOR` percent, and the whole exam at least `EXAM_FLOOR`.
An exam that no model learns ties every agent at 0, however closed it is to rules.

This module holds only the formats and the limits: the engine never imports the toolkit, and
the toolkit's learner fills a `LearnReport`.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

LEARN_REPORT_VERSION = 1
TIER1_FLOOR = 50.0
"""Lowest share (percent) of a family's tier-1 questions the cpu-scale learner must pass."""
EXAM_FLOOR = 15.0
"""Lowest share (percent) of the whole exam the cpu-scale learner must pass."""
GATED_SCALE = "cpu"
"""The scale whose table the gate holds to the floors (the one a maintainer runs anywhere)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LearnRow(_Model):
    """One family's questions of one tier, graded after training on the family's text."""

    family: str = Field(description="The exam family.")
    tier: int = Field(ge=1, le=3, description="The difficulty tier (families.base.TIERS).")
    total: int = Field(ge=0, description="Questions of this family and tier in the exam.")
    passed: int = Field(ge=0, description="Questions the trained model answered exactly.")
    percent: float = Field(ge=0, le=100, description="passed / total, percent (2 decimals).")
    steps: int = Field(ge=0, description="Training steps of the family's model.")
    bytes_seen: int = Field(ge=0, description="Bytes of training text read (padding included).")
    final_loss: float | None = Field(description="Weighted loss of the last steps, nats/byte.")
    seconds: float = Field(ge=0, description="Training seconds of the family's model.")
    budget_steps: int | None = Field(
        default=None, ge=0, description="The steps the family was given (None: a time budget)."
    )
    cut: bool = Field(
        default=False, description="A cap in seconds stopped it before its budget of steps."
    )
    draw: int | None = Field(
        default=None,
        ge=0,
        description="With several draws (--draws): the seed of the model kept, the one that "
        "passed most held-out questions (None: one draw).",
    )
    held_out: list[int] | None = Field(
        default=None,
        description="With several draws: the held-out questions each draw passed, in seed "
        "order (documents of the training text's own generator, never the exam).",
    )
    held_out_total: int | None = Field(
        default=None, ge=0, description="With several draws: the held-out questions asked."
    )


class LearnTotal(_Model):
    """Passed questions over a set of rows."""

    total: int = Field(ge=0)
    passed: int = Field(ge=0)
    percent: float = Field(ge=0, le=100)


class LearnReport(_Model):
    """The reference learner's table for one exam (`toolkit learn-exam --json`, and the
    manifest's `learnability` after `toolkit build-exam --learn`)."""

    version: int = Field(default=LEARN_REPORT_VERSION, description="Format version.")
    scale: str = Field(description="cpu or gpu (toolkit.learn.scale).")
    device: str = Field(description="Where it trained.")
    model: str = Field(description="The model's shape, e.g. '2 layers x 128, context 1024'.")
    seconds_per_family: float | None = Field(
        description="The cap in training seconds a family (None: none; before steps, its "
        "whole budget)."
    )
    steps_per_family: int | None = Field(
        default=None, description="Training steps each family was given (None: a time budget)."
    )
    learner: str = Field(
        default="own-bank",
        description="own-bank: trained on the exam's own bank; public-side: only on a public "
        "bank's generators, randomized (`toolkit learn-exam --randomize`).",
    )
    seed: int = Field(
        default=0, description="The models' draw: initial weights and batch order (--seed)."
    )
    draws: int = Field(
        default=1,
        ge=1,
        description="Models trained per family (seeds seed, seed+1, ...); the one that passed "
        "most held-out questions is graded (--draws).",
    )
    bank_id: str = Field(description="The bank the training text came from.")
    exam_sha256: str = Field(description="SHA-256 of the exam graded.")
    rows: list[LearnRow] = Field(description="Per family and tier, in exam order.")
    families: dict[str, LearnTotal] = Field(description="Per family, all its tiers.")
    tiers: dict[str, LearnTotal] = Field(description="Per tier, every family.")
    total: LearnTotal = Field(description="The families learned, together.")


def percent(passed: int, total: int) -> float:
    return round(100.0 * passed / total, 2) if total else 0.0


def totals(rows: list[LearnRow]) -> LearnTotal:
    """`rows` added up."""
    total = sum(r.total for r in rows)
    passed = sum(r.passed for r in rows)
    return LearnTotal(total=total, passed=passed, percent=percent(passed, total))


def cut_short(report: LearnReport) -> list[str]:
    """The families that a cap in seconds stopped before their steps (`LearnRow.cut`)."""
    return list(dict.fromkeys(r.family for r in report.rows if r.cut))


def learn_problems(report: LearnReport, *, public_bank: bool) -> list[str]:
    """Why the learnable side refuses the exam (empty when it passes, for a public bank, or
    for a table of another scale than the gate's). A family that a cap cut short is not
    judged: the exam is refused until it trains its whole budget."""
    if public_bank or report.scale != GATED_SCALE:
        return []
    cut = cut_short(report)
    if cut:
        return [
            f"too few steps to judge: the cap of {report.seconds_per_family:g} s a family cut "
            f"{', '.join(cut)} short of {report.steps_per_family} steps; rerun without "
            "--seconds, or on a less loaded box"
        ]
    problems = []
    low = [
        f"{r.family} ({r.passed}/{r.total})"
        for r in report.rows
        if r.tier == 1 and r.percent < TIER1_FLOOR
    ]
    if low:
        problems.append(
            f"the reference learner ({report.scale} scale) passes under {TIER1_FLOOR:g}% of the "
            f"tier-1 questions of families {', '.join(low)}: no model an hour of work builds "
            "would rank agents there; make their tier-1 look-ups learnable (shorter documents, "
            "the key and its value in the family's own layout, see the maintainers' exam page)"
        )
    families = {r.family for r in report.rows}
    if not any(r.tier == 1 for r in report.rows):
        problems.append(
            f"the exam has no tier-1 question in families {', '.join(sorted(families))}: "
            "set each family's `tiers` mix with a share of tier 1"
        )
    if report.total.percent < EXAM_FLOOR:
        problems.append(
            f"the reference learner ({report.scale} scale) passes {report.total.percent:g}% of "
            f"the exam (at least {EXAM_FLOOR:g}%): every agent would tie near 0"
        )
    return problems


def verdict(report: LearnReport, *, public_bank: bool) -> str:
    """One line: the table against the gate's floors."""
    cut = cut_short(report)
    if cut:
        return (
            f"verdict: too few steps to judge (the cap of {report.seconds_per_family:g} s cut "
            f"{', '.join(cut)} short)"
        )
    if report.scale != GATED_SCALE:
        return f"verdict: not gated (the gate holds the {GATED_SCALE} scale to its floors)"
    floors = f"tier 1 >= {TIER1_FLOOR:g}% in every family, the exam >= {EXAM_FLOOR:g}%"
    problems = learn_problems(report, public_bank=False)
    note = " (a public bank: measured, not gated)" if public_bank else ""
    if not problems:
        return f"verdict: meets the gate's floors ({floors}){note}"
    return f"verdict: below the gate's floors ({floors}){note}"


def draws_words(draws: int) -> str:
    """ ", best of 2 draws" where a family trained several models, else nothing: what every
    title and header line of the learners appends."""
    return f", best of {draws} draws" if draws > 1 else ""


def budget_words(report: LearnReport) -> str:
    """A family's budget in a few words, as the tables' titles say it."""
    if report.steps_per_family is None:  # a table from before steps: a time budget
        return f"{report.seconds_per_family or 0:g} s a family"
    cap = "" if report.seconds_per_family is None else f", cap {report.seconds_per_family:g} s"
    return f"{report.steps_per_family:,} steps a family{cap}"
