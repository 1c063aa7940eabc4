"""Solvers that copy from the prompt itself: the longest earlier match, a prompt n-gram model."""

from __future__ import annotations

from collections import Counter

from exam_builder.solvers.base import Solver
from exam_builder.solvers.text import Prompt, clean

LONGEST_MATCH = 256
"""The longest suffix the induction solver looks for (characters)."""
NGRAM_ORDER = 6
"""The longest context of the prompt n-gram model (characters)."""
MAX_SEEN = 64
"""Latest occurrences of a context the n-gram model counts (this bounds its work)."""
CONTINUATION = 64
"""Characters a copying solver writes at most (it stops at a line end)."""


def _induction(p: Prompt) -> str | None:
    """What followed the longest earlier occurrence of the prompt's end (an induction head),
    copied to the end of that line."""
    text = p.text
    end = -1
    size = 1
    while size <= min(LONGEST_MATCH, len(text) - 1):
        pos = text.rfind(text[-size:], 0, len(text) - 1)
        if pos < 0:
            break
        end = pos + size
        size += 1
    if end < 0:
        return None
    return clean(text[end : end + CONTINUATION].split("\n", 1)[0])


def _ngram(p: Prompt) -> str | None:
    """Greedy generation by a character n-gram model learned from the prompt alone: the most
    frequent next character after the longest context seen before, among its latest
    `MAX_SEEN` occurrences (ties: the character seen last in the prompt)."""
    text = p.text
    out = ""
    for _ in range(CONTINUATION):
        current = text + out
        nxt = None
        for k in range(min(NGRAM_ORDER, len(current) - 1), 0, -1):
            context = current[-k:]
            follow: Counter[str] = Counter()
            end = len(text) - 1  # an occurrence must leave a character after it
            for _ in range(MAX_SEEN):
                pos = text.rfind(context, 0, end)
                if pos < 0:
                    break
                follow[text[pos + k]] += 1
                end = pos + k - 1
            if follow:
                top = max(follow.values())
                nxt = next(c for c in reversed(text) if follow.get(c) == top)
                break
        if nxt is None or nxt == "\n":
            break
        out += nxt
    return clean(out)


INDUCTION = Solver("induction", "copy what followed the longest earlier match", _induction)
NGRAM = Solver("prompt_ngram", "a character 6-gram model of the prompt itself", _ngram)
