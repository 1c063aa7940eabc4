# The built-in family lists as it was before issue 28 (exam_builder 1.1.0), kept for the tests:
# its answers are values of the prompt, which a blind guesser or a rule reads.
"""Lists: an invented list, then its order asked about.

    List of the Dorvel: tarsi, mobek, lunda, fesk, orvi.
    Item 3 of the Dorvel: lunda.
    After fesk in the Dorvel comes orvi.
    The Dorvel backwards: orvi, fesk, lunda, mobek, tarsi.

Position, successor, predecessor, last item, first in alphabetical order, and the whole list
reversed. Sizes and every phrase are bank parameters.
"""

from __future__ import annotations

import random
import re
from typing import ClassVar

from pydantic import Field, model_validator

from exam_builder.document import Document
from exam_builder.families.base import Family, Params, SolveError, distinct, last_line
from exam_builder.families.phrasing import Phrases, template_regex
from exam_builder.lexicon import Lexicon

KINDS = ["item", "after", "before", "last", "alphabetical", "backwards"]


class ListsPhrases(Phrases):
    """Wording; {list} is the list's name, {n} a position, {item} a list item."""

    SLOTS: ClassVar[dict[str, tuple[str, ...]]] = {
        "heading": ("list",),
        "item": ("n", "list"),
        "after": ("item", "list"),
        "before": ("item", "list"),
        "last": ("list",),
        "alphabetical": ("list",),
        "backwards": ("list",),
    }
    heading: str = "List of the {list}: "
    item: str = "Item {n} of the {list}: "
    after: str = "After {item} in the {list} comes "
    before: str = "Before {item} in the {list} comes "
    last: str = "The last item of the {list}: "
    alphabetical: str = "The {list} in alphabetical order starts with "
    backwards: str = "The {list} backwards: "


class ListsParams(Params):
    min_length: int = Field(default=5, ge=3, le=20, description="Fewest items in a list.")
    max_length: int = Field(default=8, ge=3, le=20, description="Most items in a list.")
    kinds: list[str] = Field(
        default_factory=lambda: list(KINDS),
        min_length=1,
        description=f"Question kinds to use, from {KINDS}.",
    )
    phrases: ListsPhrases = Field(default_factory=ListsPhrases, description="Wording.")

    @model_validator(mode="after")
    def _check(self) -> ListsParams:
        if self.min_length > self.max_length:
            raise ValueError("min_length must not exceed max_length")
        unknown = [k for k in self.kinds if k not in KINDS]
        if unknown:
            raise ValueError(f"unknown kinds {unknown}; known: {KINDS}")
        return self


def generate(rng: random.Random, p: ListsParams, lex: Lexicon) -> Document:
    items = lex.words(rng.randint(p.min_length, p.max_length))
    title = lex.name()
    say = p.phrases
    doc = Document()
    doc.say(f"{say.heading.format(list=title)}{', '.join(items)}.\n")

    def draw() -> tuple[str, str]:
        kind = rng.choice(p.kinds)
        k = rng.randrange(len(items) - 1)  # an item that has a successor
        if kind == "item":
            return say.item.format(n=k + 1, list=title), items[k]
        if kind == "after":
            return say.after.format(item=items[k], list=title), items[k + 1]
        if kind == "before":
            return say.before.format(item=items[k + 1], list=title), items[k]
        if kind == "last":
            return say.last.format(list=title), items[-1]
        if kind == "alphabetical":
            return say.alphabetical.format(list=title), min(items)
        return say.backwards.format(list=title), ", ".join(reversed(items))

    for question, answer in distinct(draw, p.questions):
        doc.say(question)
        doc.ask(answer)
        doc.say(".\n")
    return doc


_SLOTS = {"list": r"[A-Z][a-z]+", "n": r"\d+", "item": r"[a-z]+"}


def solve(prompt: str, p: ListsParams) -> str:
    say = p.phrases
    heading = template_regex(say.heading, **_SLOTS)
    found = re.search(rf"^{heading}(?P<items>[a-z, ]+)\.$", prompt, re.M)
    if not found:
        raise SolveError("no list in the prompt")
    items = found.group("items").split(", ")
    q = last_line(prompt)
    for kind in KINDS:
        m = re.fullmatch(template_regex(getattr(say, kind), **_SLOTS), q)
        if not m:
            continue
        if kind == "item":
            return items[int(m.group("n")) - 1]
        if kind == "after":
            return items[items.index(m.group("item")) + 1]
        if kind == "before":
            return items[items.index(m.group("item")) - 1]
        if kind == "last":
            return items[-1]
        if kind == "alphabetical":
            return min(items)
        return ", ".join(reversed(items))
    raise SolveError(f"not a list question: {q!r}")


FAMILY = Family(
    name="old_lists",
    params=ListsParams,
    generate=generate,
    solve=solve,
    description="ordering, n-th item, successor",
)
