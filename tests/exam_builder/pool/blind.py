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


SOLVERS = [
    Solver(
        "blind-record",
        "a value of the record the question points to",
        lambda p: _pick(p, _record_values(p)),
    ),
    Solver("blind-once", "a capitalised word seen once", lambda p: _pick(p, _capitalised_once(p))),
    Solver("blind-number", "a number of the prompt", lambda p: _pick(p, _numbers(p))),
]
