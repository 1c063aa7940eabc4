"""Red-team pool, test copy: blind guessers (issue 28). They know no family and no word: each
picks, seeded by the prompt, one of the prompt's values that look like an answer. A maintainer
keeps such files in a hidden bank's `solvers/` folder; these are the tests' own."""

from __future__ import annotations

import hashlib
import re

from exam_builder.solvers.base import Solver
from exam_builder.solvers.text import Prompt

_TOKEN = re.compile(r"[A-Za-z0-9]+(?:[-:@.][A-Za-z0-9]+)*")
_CUT = re.compile(r"\n|(?<=[.!?])\s+")


def _pick(prompt: Prompt, values: list[str]) -> str | None:
    """One of `values`, chosen by a hash of the prompt (deterministic, uniform)."""
    values = list(dict.fromkeys(values))
    if not values:
        return None
    seed = int.from_bytes(hashlib.sha256(prompt.context.encode()).digest()[:8], "big")
    return values[seed % len(values)]


def _record_values(prompt: Prompt) -> list[str]:
    """The other tokens of the records (lines, sentences) holding a rare token of the question."""
    records = [r for r in _CUT.split(prompt.context) if r.strip()]
    asked = list(dict.fromkeys(_TOKEN.findall(prompt.question)))  # in order: determinism
    out: list[str] = []
    for token in asked:
        holding = [r for r in records if token in _TOKEN.findall(r)]
        if 0 < len(holding) <= 3:
            out += [t for r in holding for t in _TOKEN.findall(r) if t not in asked]
    return [t for t in out if not t.islower() or len(t) > 3]


def _capitalised_once(prompt: Prompt) -> list[str]:
    found = re.findall(r"\b[A-Z][a-z]+\b", prompt.context)
    return [w for w in found if found.count(w) == 1]


def _numbers(prompt: Prompt) -> list[str]:
    return re.findall(r"-?\b\d+\b", prompt.context)


def _gap(prompt: Prompt) -> str | None:
    """The difference of two numbers of the prompt, both picked by the prompt's hash."""
    numbers = list(dict.fromkeys(int(n) for n in _numbers(prompt)))
    if len(numbers) < 2:
        return None
    seed = int.from_bytes(hashlib.sha256(prompt.context.encode()).digest()[8:16], "big")
    a = numbers[seed % len(numbers)]
    b = numbers[(seed // len(numbers)) % (len(numbers) - 1)]
    b = b if b != a else numbers[-1]
    return str(abs(a - b))


def _signs(prompt: Prompt) -> str | None:
    """A running count read blind: the first number of the sentences naming the question's
    name, plus each later one with a sign drawn from the prompt's hash."""
    names = [n for n in re.findall(r"\b[A-Z][a-z]+\b", prompt.question) if n in prompt.context]
    if not names:
        return None
    sentences = [s for s in _CUT.split(prompt.context) if names[-1] in s]
    numbers = [int(n) for s in sentences for n in re.findall(r"\b\d+\b", s)]
    if not numbers:
        return None
    bits = int.from_bytes(hashlib.sha256(prompt.context.encode()).digest()[16:24], "big")
    total = numbers[0]
    for i, n in enumerate(numbers[1:]):
        total += n if bits >> i & 1 else -n
    return str(total)


SOLVERS = [
    Solver(
        "blind-record",
        "a value of the record the question points to",
        lambda p: _pick(p, _record_values(p)),
    ),
    Solver("blind-once", "a capitalised word seen once", lambda p: _pick(p, _capitalised_once(p))),
    Solver("blind-number", "a number of the prompt", lambda p: _pick(p, _numbers(p))),
    Solver("blind-gap", "the difference of two numbers of the prompt", _gap),
    Solver("blind-signs", "a running count with random signs", _signs),
]
