"""What a family is: a parameter model, a document generator and a reference solver.

A family is one small module (`exam_builder/families/<name>.py`, or `plugins/<name>.py` in a
bank) that defines `FAMILY = Family(...)`:

- `params`: a pydantic model of its knobs (sizes, vocabularies, and the wording of its
  headings and questions as templates, see `phrasing`), every field with a default, so a bank
  only states what it changes;
- `generate(rng, params, lexicon) -> Document`: one document with one or more answer spans,
  using only `rng` (a seeded `random.Random`) and `lexicon` for randomness;
- `solve(prompt, params) -> str`: the reference solver. It reads only the prompt as the grader
  sends it (its last 1,024 bytes) and must find every answer: this is the proof that each
  question is determined by its visible context. The build refuses an exam where it fails;
- `tiers`: the difficulty tiers its questions come in (`TIERS`), its own first. A family that
  makes several draws each document's tier with `pick_tier(rng, params)` (the bank sets the
  mix in the family's `tiers` parameter) and marks each question, `doc.ask(answer, tier=...)`;
  where the bank sets no mix, it makes its first tier only and need not mark anything. Tier 1
  of the built-in families is a register look-up (`register.with_register`), which a plug-in
  can use too.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from exam_builder.document import Document
from exam_builder.lexicon import Lexicon

TIERS: dict[int, str] = {
    1: "one look-up in the family's own layout, among same-shape distractors",
    2: "two facts or two hops",
    3: "computed or composed",
}
"""The difficulty tiers of a question. Scores spread across them: the untouched starter near 0,
a model trained on the formats well above it on tier 1, agents in between. A tier-1 question
escapes rules by its layout and its distractors, never by being hard."""


class Params(BaseModel):
    """Base of every family's parameters: unknown keys are an error (a typo must not pass)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    questions: int = Field(
        default=3, ge=1, le=10, description="Answer spans per document (the last may have fewer)."
    )
    tiers: dict[int, float] = Field(
        default_factory=dict,
        description="The mix of tiers: a weight per tier the family makes, e.g. "
        "{1 = 0.5, 2 = 0.3, 3 = 0.2}; each document's tier is drawn by weight (empty: the "
        "family's one tier).",
    )

    @field_validator("tiers")
    @classmethod
    def _tier_mix(cls, v: dict[int, float]) -> dict[int, float]:
        bad = [t for t, w in v.items() if t not in TIERS or w < 0]
        if bad or (v and sum(v.values()) <= 0):
            raise ValueError(f"a weight of at least 0 per tier of {sorted(TIERS)}, not all 0")
        return v


def pick_tier(rng: random.Random, params: Params) -> int | None:
    """A document's tier, drawn by the weights of `params.tiers` (None, drawing nothing, when
    the family has one tier)."""
    mix = [(t, w) for t, w in sorted(params.tiers.items()) if w > 0]
    if not mix:
        return None
    if len(mix) == 1:
        return mix[0][0]
    return rng.choices([t for t, _ in mix], weights=[w for _, w in mix])[0]


P = TypeVar("P", bound=Params)


@dataclass(frozen=True)
class Family(Generic[P]):
    """One exam family (see the module docstring)."""

    name: str
    params: type[P]
    generate: Callable[[random.Random, P, Lexicon], Document]
    solve: Callable[[str, P], str]
    description: str = ""
    tiers: tuple[int, ...] = (2,)
    """The tiers its questions come in (`TIERS`); a family of one tier need not mark them."""


AnyFamily = Family[Any]


class SolveError(ValueError):
    """The reference solver could not read the prompt (so the question is not well-posed)."""


def last_line(prompt: str) -> str:
    """The unfinished last line of a prompt: where the question is asked."""
    return prompt.rsplit("\n", 1)[-1]


def distinct(
    draw: Callable[[], tuple[str, str]], n: int, tries: int = 100
) -> list[tuple[str, str]]:
    """Up to `n` (question, answer) pairs from `draw`, never the same question twice."""
    out: list[tuple[str, str]] = []
    seen: set[str] = set()  # membership only
    for _ in range(tries):
        if len(out) == n:
            break
        question, answer = draw()
        if question not in seen:
            seen.add(question)
            out.append((question, answer))
    return out
