"""Symbolic sequences: a string rule shown by examples, then applied to new words.

    The Kelvan machine turns words into words:
    tarvo -> ovrat
    mesk -> ksem
    dolmi -> imlod

The rule (reverse, rotate, double letters, swap pairs, add an invented affix, ...) is never
named: it must be induced from the examples. The generator keeps only example sets that exactly
one known rule explains, so the answer is determined. Example counts are bank parameters.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from typing import ClassVar

from pydantic import Field, field_validator

from exam_builder.document import Document
from exam_builder.families.base import Family, SolveError, last_line
from exam_builder.families.phrasing import Phrases, template_regex
from exam_builder.families.register import Register, RegisterParams, lookup_field, with_register
from exam_builder.lexicon import Lexicon

Rule = Callable[[str], str]


def _swap_pairs(w: str) -> str:
    return "".join(w[i + 1] + w[i] if i + 1 < len(w) else w[i] for i in range(0, len(w), 2))


FIXED_RULES: dict[str, Rule] = {
    "reverse": lambda w: w[::-1],
    "rotate_left": lambda w: w[1:] + w[:1],
    "rotate_right": lambda w: w[-1:] + w[:-1],
    "double_letters": lambda w: "".join(c + c for c in w),
    "swap_pairs": _swap_pairs,
    "mirror": lambda w: w + w[::-1],
    "repeat": lambda w: w + w,
    "first_last_swap": lambda w: w[-1] + w[1:-1] + w[0] if len(w) > 1 else w,
}
RULE_NAMES = [*FIXED_RULES, "suffix", "prefix"]


class SymbolicPhrases(Phrases):
    """Wording; an example line is `example` filled, a question is its text up to {target}."""

    SLOTS: ClassVar[dict[str, tuple[str, ...]]] = {
        "heading": ("place", "machine"),
        "example": ("source", "target"),
    }
    heading: str = "The {place} {machine} turns words into words:"
    example: str = "{source} -> {target}"

    @field_validator("example")
    @classmethod
    def _source_first(cls, v: str) -> str:
        if "{{" in v or "}}" in v or v.find("{source}") > v.find("{target}"):
            raise ValueError("example: {source} must come before {target}, no literal braces")
        return v


class SymbolicParams(RegisterParams):
    lookup: Register = lookup_field("Symbols", "symbol {key}")
    examples: int = Field(default=3, ge=2, le=8, description="Worked examples before questions.")
    rules: list[str] = Field(
        default_factory=lambda: list(RULE_NAMES),
        min_length=1,
        description=f"Rules to draw from, out of {RULE_NAMES}.",
    )
    machines: list[str] = Field(
        default_factory=lambda: ["machine", "mirror", "loom", "press"],
        min_length=1,
        description="What turns words into words (a word for the heading).",
    )
    phrases: SymbolicPhrases = Field(default_factory=SymbolicPhrases, description="Wording.")

    @field_validator("rules")
    @classmethod
    def _known(cls, v: list[str]) -> list[str]:
        unknown = [r for r in v if r not in RULE_NAMES]
        if unknown:
            raise ValueError(f"unknown rules {unknown}; known: {RULE_NAMES}")
        return v


def _candidates(examples: list[tuple[str, str]]) -> dict[str, Rule]:
    """Every rule we know that could explain the first example (affixes read from it)."""
    rules = dict(FIXED_RULES)
    src, dst = examples[0]
    if dst.startswith(src) and len(dst) > len(src):
        suffix = dst[len(src) :]
        rules["suffix"] = lambda w: w + suffix
    if dst.endswith(src) and len(dst) > len(src):
        prefix = dst[: len(dst) - len(src)]
        rules["prefix"] = lambda w: prefix + w
    return rules


def _fitting(examples: list[tuple[str, str]]) -> list[str]:
    rules = _candidates(examples)
    return [n for n, r in rules.items() if all(r(s) == d for s, d in examples)]


def _rule(name: str, lex: Lexicon) -> Rule:
    if name == "suffix":
        affix = lex.word(1, 1, min_len=2)
        return lambda w: w + affix
    if name == "prefix":
        affix = lex.word(1, 1, min_len=2)
        return lambda w: affix + w
    return FIXED_RULES[name]


def generate(rng: random.Random, p: SymbolicParams, lex: Lexicon) -> Document:
    name = rng.choice(p.rules)
    rule = _rule(name, lex)
    for _ in range(100):
        examples = [(w, rule(w)) for w in lex.words(p.examples)]
        if _fitting(examples) == [name]:
            break
    else:
        raise ValueError(f"could not find examples that single out the rule {name!r}")
    say = p.phrases
    doc = Document()
    doc.say(say.heading.format(place=lex.name(), machine=rng.choice(p.machines)) + "\n")
    for src, dst in examples:
        doc.say(say.example.format(source=src, target=dst) + "\n")
    before, after = say.example.split("{target}")
    for _ in range(p.questions):
        word = lex.word()
        doc.say(before.format(source=word))
        doc.ask(rule(word))
        doc.say(after + "\n")
    return doc


def solve(prompt: str, p: SymbolicParams) -> str:
    say = p.phrases
    line = template_regex(say.example, source="[a-z]+", target="[a-z]+")
    examples = [(m["source"], m["target"]) for m in re.finditer(f"^{line}$", prompt, re.M)]
    before = say.example.split("{target}")[0]
    m = re.fullmatch(template_regex(before, source="[a-z]+"), last_line(prompt))
    if not examples or not m:
        raise SolveError("no examples or no word to transform")
    fitting = _fitting(examples)
    if len(fitting) != 1:
        raise SolveError(f"the examples fit {len(fitting)} rules: {fitting}")
    return _candidates(examples)[fitting[0]](m["source"])


_generate, _solve = with_register(generate, solve)

FAMILY = Family(
    name="symbolic",
    params=SymbolicParams,
    generate=_generate,
    solve=_solve,
    tiers=(3, 1),
    description="string rules induced from examples",
)
