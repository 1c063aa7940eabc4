"""What a generic solver is, and how its guess is graded.

A generic solver reads a prompt (the grader's last 1,024 bytes) and returns one finite guess,
or None. It does not know the answer's length: like a bundle that is only told to continue the
prompt, it writes its guess and whatever follows (a newline, the rest of a line). The guess is
graded the way the grader grades a bundle's output: correct when its first `len(answer)` bytes
are the answer. A guess shorter than the answer is wrong (its padding cannot complete it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from exam_builder.document import MASK
from exam_builder.solvers.text import Prompt

MAX_GUESS_CHARS = 256
"""A guess is cut to this many characters (every answer of an exam is shorter)."""


@dataclass(frozen=True)
class Solver:
    """A model-free solver written against a structure of prompts, not against any wording."""

    name: str
    structure: str
    """The structure it exploits, in a few words (shown in the gate's table legend)."""
    guess: Callable[[Prompt], str | None]


def graded(guess: str | None, answer: str) -> bool:
    """True when the first `len(answer)` bytes of `guess` are `answer` (see the module doc)."""
    if guess is None:
        return False
    want = answer.encode("utf-8")
    return guess.encode("utf-8")[: len(want)] == want


def run(solver: Solver, prompt: str | Prompt) -> str | None:
    """`solver`'s guess for `prompt` (None when it cannot read it), at most `MAX_GUESS_CHARS`.

    Pass one `Prompt` to every solver of a question: what it parses is shared between them."""
    try:
        guess = solver.guess(prompt if isinstance(prompt, Prompt) else Prompt(prompt))
    except (ValueError, IndexError, KeyError, ZeroDivisionError, OverflowError):
        return None  # a prompt that does not have the structure: no guess
    if guess is None:
        return None
    # A masked span hides an answer: nothing after it is known, so the guess stops there.
    return guess.split(MASK[0], 1)[0][:MAX_GUESS_CHARS] or None
