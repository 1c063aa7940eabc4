"""Numeric sequences: arithmetic shown or defined in the prompt, then continued.

    Sequence Tarvik: 7, 12, 17, 22, 27, ...
    Term 8 of Tarvik: 42.

    To morsk a number, multiply it by 3, then add 14.
    morsk 25 = 89

Sequences are arithmetic, geometric, Fibonacci-like or quadratic and must be recognised from the
terms shown; operations are defined in words under an invented verb. Magnitudes are bank
parameters (kept large enough that guessing a number is hopeless).
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Callable

from pydantic import Field, model_validator

from exam_builder.document import Document
from exam_builder.families.base import Family, Params, SolveError, last_line
from exam_builder.lexicon import Lexicon

Seq = Callable[[int], int]  # term number (1-based) -> value


class NumericParams(Params):
    shown: int = Field(default=5, ge=4, le=10, description="Terms of a sequence shown.")
    furthest_term: int = Field(default=12, ge=5, le=30, description="Latest term asked for.")
    operations: float = Field(
        default=0.4, ge=0, le=1, description="Share of documents that define an operation."
    )
    largest_start: int = Field(default=60, ge=2, le=10_000, description="Largest first term.")

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


def _operation(rng: random.Random, lex: Lexicon) -> tuple[str, Callable[[int], int], str]:
    verb = lex.word()
    m, c = rng.randint(2, 9), rng.randint(3, 49)
    if rng.random() < 0.5:
        return verb, lambda x: m * x + c, f"multiply it by {m}, then add {c}"
    return verb, lambda x: m * (x + c), f"add {c}, then multiply by {m}"


def generate(rng: random.Random, p: NumericParams, lex: Lexicon) -> Document:
    doc = Document()
    if rng.random() < p.operations:
        verb, op, words = _operation(rng, lex)
        doc.say(f"To {verb} a number, {words}.\n")
        for x in rng.sample(range(10, 100), p.questions):
            doc.say(f"{verb} {x} = ")
            doc.ask(str(op(x)))
            doc.say("\n")
        return doc
    name = lex.name()
    for _ in range(100):
        seq = _sequence(rng, p.largest_start)
        shown = [seq(n) for n in range(1, p.shown + 1)]
        asked = [seq(n) for n in range(1, p.furthest_term + 1)]
        if all(_infer(shown)(n) == v for n, v in enumerate(asked, 1)) and all(
            abs(v) < 10**7 for v in asked
        ):
            break
    else:
        raise ValueError("could not draw an unambiguous sequence; lower furthest_term")
    doc.say(f"Sequence {name}: {', '.join(map(str, shown))}, ...\n")
    later = range(p.shown + 1, p.furthest_term + 1)
    terms = rng.sample(later, min(p.questions, len(later)))
    for n in terms:
        doc.say(f"Term {n} of {name}: ")
        doc.ask(str(seq(n)))
        doc.say(".\n")
    return doc


def solve(prompt: str, p: NumericParams) -> str:
    q = last_line(prompt)
    if m := re.fullmatch(r"Term (\d+) of [A-Z][a-z]+: ", q):
        found = re.search(r"^Sequence [A-Z][a-z]+: ([-\d, ]+), \.\.\.$", prompt, re.M)
        if not found:
            raise SolveError("no sequence in the prompt")
        return str(_infer([int(t) for t in found.group(1).split(", ")])(int(m.group(1))))
    if m := re.fullmatch(r"([a-z]+) (\d+) = ", q):
        found = re.search(r"^To ([a-z]+) a number, (.+)\.$", prompt, re.M)
        if not found or found.group(1) != m.group(1):
            raise SolveError("no definition of the operation")
        x, nums = int(m.group(2)), [int(v) for v in re.findall(r"\d+", found.group(2))]
        if found.group(2).startswith("multiply"):
            return str(nums[0] * x + nums[1])
        return str(nums[1] * (x + nums[0]))
    raise SolveError(f"not a numeric question: {q!r}")


FAMILY = Family(
    name="numeric",
    params=NumericParams,
    generate=generate,
    solve=solve,
    description="sequences and operations defined or shown in the prompt",
)
