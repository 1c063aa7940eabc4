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
  question is determined by its visible context. The build refuses an exam where it fails.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from exam_builder.document import Document
from exam_builder.lexicon import Lexicon


class Params(BaseModel):
    """Base of every family's parameters: unknown keys are an error (a typo must not pass)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    questions: int = Field(
        default=3, ge=1, le=10, description="Answer spans per document (the last may have fewer)."
    )


P = TypeVar("P", bound=Params)


@dataclass(frozen=True)
class Family(Generic[P]):
    """One exam family (see the module docstring)."""

    name: str
    params: type[P]
    generate: Callable[[random.Random, P, Lexicon], Document]
    solve: Callable[[str, P], str]
    description: str = ""


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
