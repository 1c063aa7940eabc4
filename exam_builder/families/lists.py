"""Lists: an invented list, then its order asked about.

    List of the Dorvel: tarsi, mobek, lunda, fesk, orvi.
    Items 2 to 4 of the Dorvel, last first: fesk, lunda, mobek.
    Every second item of the Dorvel: tarsi, lunda, orvi.
    On either side of lunda in the Dorvel: mobek and fesk.
    The Dorvel backwards: orvi, fesk, lunda, mobek, tarsi.

A stretch read backwards, every second item, the two neighbours of an item, and (not by
default) the whole list reversed: every answer is several items in an order the list does not
have, so it is written nowhere in the prompt and a blind pick among the list's items scores
nothing (a single item asked by position or successor was right one time in five by such a
pick). The whole list reversed is left out by default because a generic rule that reverses
the list reads it, and a stretch never reaches the last item, which would begin that reversed
list. Sizes and every phrase are bank parameters.
"""

from __future__ import annotations

import random
import re
from typing import ClassVar

from pydantic import Field, model_validator

from exam_builder.document import Document
from exam_builder.families.base import Family, SolveError, distinct, last_line
from exam_builder.families.phrasing import Phrases, template_regex
from exam_builder.families.register import Register, RegisterParams, lookup_field, with_register
from exam_builder.lexicon import Lexicon

KINDS = ["stretch", "alternate", "around", "backwards"]


class ListsPhrases(Phrases):
    """Wording; {list} is the list's name, {n} and {m} positions, {item} a list item;
    `around` answers with `both` (the item before, then the one after)."""

    SLOTS: ClassVar[dict[str, tuple[str, ...]]] = {
        "heading": ("list",),
        "stretch": ("n", "m", "list"),
        "alternate": ("list",),
        "around": ("item", "list"),
        "backwards": ("list",),
        "both": ("before", "after"),
    }
    heading: str = "List of the {list}: "
    stretch: str = "Items {n} to {m} of the {list}, last first: "
    alternate: str = "Every second item of the {list}: "
    around: str = "On either side of {item} in the {list}: "
    backwards: str = "The {list} backwards: "
    both: str = "{before} and {after}"


class ListsParams(RegisterParams):
    lookup: Register = lookup_field("Tags", "tag {key}")
    min_length: int = Field(default=5, ge=3, le=20, description="Fewest items in a list.")
    max_length: int = Field(default=8, ge=3, le=20, description="Most items in a list.")
    kinds: list[str] = Field(
        default_factory=lambda: ["stretch", "alternate", "around"],
        min_length=1,
        description=f"Question kinds to use, from {KINDS} ('backwards' is not a default: "
        "a generic rule reverses a list).",
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
        if kind == "stretch":
            # 2 to 4 items, never up to the last: read backwards from the end, that stretch
            # would begin the whole list reversed, which a generic rule writes out.
            n = rng.randrange(len(items) - 2)
            m = rng.randrange(n + 1, min(n + 4, len(items) - 1))
            question = say.stretch.format(n=n + 1, m=m + 1, list=title)
            return question, ", ".join(reversed(items[n : m + 1]))
        if kind == "alternate":
            return say.alternate.format(list=title), ", ".join(items[::2])
        if kind == "around":
            k = rng.randrange(1, len(items) - 1)  # an item with both neighbours
            answer = say.both.format(before=items[k - 1], after=items[k + 1])
            return say.around.format(item=items[k], list=title), answer
        return say.backwards.format(list=title), ", ".join(reversed(items))

    for question, answer in distinct(draw, p.questions):
        doc.say(question)
        doc.ask(answer)
        doc.say(".\n")
    return doc


_SLOTS = {"list": r"[A-Z][a-z]+", "n": r"\d+", "m": r"\d+", "item": r"[a-z]+"}


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
        if kind == "stretch":
            return ", ".join(reversed(items[int(m["n"]) - 1 : int(m["m"])]))
        if kind == "alternate":
            return ", ".join(items[::2])
        if kind == "around":
            k = items.index(m["item"])
            return say.both.format(before=items[k - 1], after=items[k + 1])
        return ", ".join(reversed(items))
    raise SolveError(f"not a list question: {q!r}")


_generate, _solve = with_register(generate, solve)

FAMILY = Family(
    name="lists",
    params=ListsParams,
    generate=_generate,
    solve=_solve,
    tiers=(3, 1),
    description="ordering, n-th item, successor",
)
