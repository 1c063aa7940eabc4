"""Numeric sequences: arithmetic shown or defined in the prompt, then continued.

    Sequence Tarvik: 7, 12, 17, 22, 27, ...
    Term 8 of Tarvik: 42.

    What morsk does to a number:
    morsk 12 = 50
    morsk 31 = 107
    morsk 25 = 89

Sequences are arithmetic, geometric, Fibonacci-like or quadratic and must be recognised from the
terms shown; an operation (a number times m, plus c) is shown by worked examples under an
invented verb and never spelt in words, so a rule that applies English operator words
("multiply", "add") to their nearest number has nothing to read. Magnitudes are bank
parameters (kept large enough that guessing a number is hopeless).
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Callable
from typing import ClassVar

from pydantic import Field, model_validator

from exam_builder.document import Document
from exam_builder.families.base import Family, SolveError, last_line
from exam_builder.families.phrasing import Phrases, template_regex
from exam_builder.families.register import Register, RegisterParams, lookup_field, with_register
from exam_builder.lexicon import Lexicon

Seq = Callable[[int], int]  # term number (1-based) -> value


class NumericPhrases(Phrases):
    """Wording; {terms} is the comma-separated start of a sequence, {steps} an operation."""

    SLOTS: ClassVar[dict[str, tuple[str, ...]]] = {
        "sequence": ("name", "terms"),
        "term": ("n", "name"),
        "define": ("verb",),
        "apply": ("verb", "x"),
    }
    sequence: str = "Sequence {name}: {terms}, ..."
    term: str = "Term {n} of {name}: "
    define: str = "What {verb} does to a number:"
    apply: str = "{verb} {x} = "


class NumericParams(RegisterParams):
    lookup: Register = lookup_field("Dials", "dial {key}")
    shown: int = Field(default=5, ge=4, le=10, description="Terms of a sequence shown.")
    furthest_term: int = Field(default=12, ge=5, le=30, description="Latest term asked for.")
    operations: float = Field(
        default=0.4, ge=0, le=1, description="Share of documents that define an operation."
    )
    largest_start: int = Field(default=60, ge=2, le=10_000, description="Largest first term.")
    examples: int = Field(
        default=3, ge=2, le=8, description="Worked examples that show an operation."
    )
    phrases: NumericPhrases = Field(default_factory=NumericPhrases, description="Wording.")

    @model_validator(mode="after")
    def _check(self) -> NumericParams:
        if self.furthest_term <= self.shown:
            raise ValueError("furthest_term must be beyond the terms shown")
        return self


def _sequence(rng: random.Random, largest: int) -> Seq:
    kind = rng.choice(["arithmetic", "geometric", "fibonacci", "quadratic"])
    a = rng.randint(2, largest)
    if kind == "arithmetic":
        d = rng.choice([-1, 1]) * rng.randint(3, 19)
        return lambda n: a + (n - 1) * d
    if kind == "geometric":
        r = rng.randint(2, 3)
        return lambda n: a * r ** (n - 1)
    if kind == "fibonacci":
        b = rng.randint(2, largest)

        def fib(n: int) -> int:
            x, y = a, b
            for _ in range(n - 1):
                x, y = y, x + y
            return x

        return fib
    c2 = rng.randint(1, 4)
    d = rng.randint(1, 9)
    return lambda n: a + d * (n - 1) + c2 * (n - 1) * (n - 2)


def _infer(terms: list[int]) -> Seq:
    """The reference solver's rule finder: the first simple rule that fits every term shown."""
    d = [y - x for x, y in itertools.pairwise(terms)]
    if len(set(d)) == 1:
        return lambda n: terms[0] + (n - 1) * d[0]
    if terms[0] and all(y == x * (terms[1] // terms[0]) for x, y in itertools.pairwise(terms)):
        r = terms[1] // terms[0]
        return lambda n: terms[0] * r ** (n - 1)
    if all(terms[i] == terms[i - 1] + terms[i - 2] for i in range(2, len(terms))):

        def fib(n: int) -> int:
            x, y = terms[0], terms[1]
            for _ in range(n - 1):
                x, y = y, x + y
            return x

        return fib
    dd = [y - x for x, y in itertools.pairwise(d)]
    if len(set(dd)) == 1:
        return lambda n: terms[0] + d[0] * (n - 1) + dd[0] * (n - 1) * (n - 2) // 2
    raise SolveError(f"no known rule fits {terms}")


def _pairs(numbers: list[int]) -> set[int]:
    """Every a + b, a - b and a * b of two of `numbers`: a term that is one of them is found
    by a blind guesser that combines the prompt's numbers (an arithmetic sequence whose start
    is a multiple of its step has such terms), so the generator draws again."""
    return {
        v
        for i, a in enumerate(numbers)
        for j, b in enumerate(numbers)
        if i != j
        for v in (a + b, a - b, a * b)
    }


def generate(rng: random.Random, p: NumericParams, lex: Lexicon) -> Document:
    say = p.phrases
    doc = Document()
    if rng.random() < p.operations:
        verb = lex.word()
        m, c = rng.randint(2, 9), rng.randint(3, 199)
        doc.say(say.define.format(verb=verb) + "\n")
        xs = rng.sample(range(10, 100), p.examples + p.questions)
        for x in xs[: p.examples]:
            doc.say(say.apply.format(verb=verb, x=x) + f"{m * x + c}\n")
        for x in xs[p.examples :]:
            doc.say(say.apply.format(verb=verb, x=x))
            doc.ask(str(m * x + c))
            doc.say("\n")
        return doc
    name = lex.name()
    for _ in range(100):
        seq = _sequence(rng, p.largest_start)
        shown = [seq(n) for n in range(1, p.shown + 1)]
        asked = [seq(n) for n in range(1, p.furthest_term + 1)]
        if (
            all(_infer(shown)(n) == v for n, v in enumerate(asked, 1))
            and all(abs(v) < 10**7 for v in asked)
            and not _pairs([*shown, *range(p.shown + 1, p.furthest_term + 1)]).intersection(
                asked[p.shown :]
            )
        ):
            break
    else:
        raise ValueError("could not draw an unambiguous sequence; lower furthest_term")
    doc.say(say.sequence.format(name=name, terms=", ".join(map(str, shown))) + "\n")
    later = range(p.shown + 1, p.furthest_term + 1)
    terms = rng.sample(later, min(p.questions, len(later)))
    for n in terms:
        doc.say(say.term.format(n=n, name=name))
        doc.ask(str(seq(n)))
        doc.say(".\n")
    return doc


_SLOTS = {"n": r"\d+", "x": r"\d+", "verb": "[a-z]+"}


def solve(prompt: str, p: NumericParams) -> str:
    say = p.phrases
    q = last_line(prompt)
    if m := re.fullmatch(template_regex(say.term, **_SLOTS, name="[A-Z][a-z]+"), q):
        line = template_regex(say.sequence, name=re.escape(m["name"]), terms=r"-?\d+(?:, -?\d+)*")
        found = re.search(f"^{line}$", prompt, re.M)
        if not found:
            raise SolveError("no sequence in the prompt")
        return str(_infer([int(t) for t in found["terms"].split(", ")])(int(m["n"])))
    if m := re.fullmatch(template_regex(say.apply, **_SLOTS), q):
        shown = template_regex(say.apply, verb=re.escape(m["verb"]), x=r"\d+")
        examples = [
            (int(e["x"]), int(e["y"])) for e in re.finditer(f"^{shown}(?P<y>-?\\d+)$", prompt, re.M)
        ]
        if len(examples) < 2:
            raise SolveError(f"fewer than two worked examples of {m['verb']!r}")
        (x1, y1), (x2, y2) = examples[:2]
        slope, rest = divmod(y2 - y1, x2 - x1)
        if rest or any(y != y1 + slope * (x - x1) for x, y in examples):
            raise SolveError(f"the examples of {m['verb']!r} are not a number times m plus c")
        return str(y1 + slope * (int(m["x"]) - x1))
    raise SolveError(f"not a numeric question: {q!r}")


_generate, _solve = with_register(generate, solve)

FAMILY = Family(
    name="numeric",
    params=NumericParams,
    generate=_generate,
    solve=_solve,
    tiers=(3, 1),
    description="sequences and operations defined or shown in the prompt",
)
