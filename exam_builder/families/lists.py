"""Lists: an invented list, then its order asked about.

    List of the Dorvel: tarsi, mobek, lunda, fesk, orvi.
    Item 3 of the Dorvel: lunda.
    After fesk in the Dorvel comes orvi.
    The Dorvel backwards: orvi, fesk, lunda, mobek, tarsi.

Position, successor, predecessor, last item, first in alphabetical order, and the whole list
reversed. Sizes are bank parameters.
"""

from __future__ import annotations

import random
import re

from pydantic import Field, model_validator

from exam_builder.document import Document
from exam_builder.families.base import Family, Params, SolveError, distinct, last_line
from exam_builder.lexicon import Lexicon

_ORDINAL_KINDS = ["item", "after", "before", "last", "alphabetical", "backwards"]


class ListsParams(Params):
    min_length: int = Field(default=5, ge=3, le=20, description="Fewest items in a list.")
    max_length: int = Field(default=8, ge=3, le=20, description="Most items in a list.")
    kinds: list[str] = Field(
        default_factory=lambda: list(_ORDINAL_KINDS),
        min_length=1,
        description=f"Question kinds to use, from {_ORDINAL_KINDS}.",
    )

    @model_validator(mode="after")
    def _check(self) -> ListsParams:
        if self.min_length > self.max_length:
            raise ValueError("min_length must not exceed max_length")
        unknown = [k for k in self.kinds if k not in _ORDINAL_KINDS]
        if unknown:
            raise ValueError(f"unknown kinds {unknown}; known: {_ORDINAL_KINDS}")
        return self


def generate(rng: random.Random, p: ListsParams, lex: Lexicon) -> Document:
    items = lex.words(rng.randint(p.min_length, p.max_length))
    title = lex.name()
    doc = Document()
    doc.say(f"List of the {title}: {', '.join(items)}.\n")

    def draw() -> tuple[str, str]:
        kind = rng.choice(p.kinds)
        k = rng.randrange(len(items) - 1)  # an item that has a successor
        if kind == "item":
            return f"Item {k + 1} of the {title}: ", items[k]
        if kind == "after":
            return f"After {items[k]} in the {title} comes ", items[k + 1]
        if kind == "before":
            return f"Before {items[k + 1]} in the {title} comes ", items[k]
        if kind == "last":
            return f"The last item of the {title}: ", items[-1]
        if kind == "alphabetical":
            return f"The {title} in alphabetical order starts with ", min(items)
        return f"The {title} backwards: ", ", ".join(reversed(items))

    for question, answer in distinct(draw, p.questions):
        doc.say(question)
        doc.ask(answer)
        doc.say(".\n")
    return doc


def solve(prompt: str, p: ListsParams) -> str:
    found = re.search(r"^List of the [A-Z][a-z]+: ([a-z, ]+)\.$", prompt, re.M)
    if not found:
        raise SolveError("no list in the prompt")
    items = found.group(1).split(", ")
    q = last_line(prompt)
    if m := re.fullmatch(r"Item (\d+) of the [A-Z][a-z]+: ", q):
        return items[int(m.group(1)) - 1]
    if m := re.fullmatch(r"After ([a-z]+) in the [A-Z][a-z]+ comes ", q):
        return items[items.index(m.group(1)) + 1]
    if m := re.fullmatch(r"Before ([a-z]+) in the [A-Z][a-z]+ comes ", q):
        return items[items.index(m.group(1)) - 1]
    if re.fullmatch(r"The last item of the [A-Z][a-z]+: ", q):
        return items[-1]
    if re.fullmatch(r"The [A-Z][a-z]+ in alphabetical order starts with ", q):
        return min(items)
    if re.fullmatch(r"The [A-Z][a-z]+ backwards: ", q):
        return ", ".join(reversed(items))
    raise SolveError(f"not a list question: {q!r}")


FAMILY = Family(
    name="lists",
    params=ListsParams,
    generate=generate,
    solve=solve,
    description="ordering, n-th item, successor",
)
