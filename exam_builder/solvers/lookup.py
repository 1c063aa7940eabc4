"""Solvers that look a key up in the context: definitions, related sentences, last values."""

from __future__ import annotations

import re

from exam_builder.solvers.base import Solver
from exam_builder.solvers.text import SEPARATOR, TOKEN, Prompt, stem

_QUOTED = re.compile(r"[\"'](?P<phrase>[^\"'\n]+)[\"']")
_AFFIX = re.compile(r"(?<![A-Za-z0-9])-(?P<affix>[a-z]+)\b")


GAP = 24
"""Characters (a few words, no sentence end) allowed between a key and its separator, as in
`Orvak's badge: KV-4821`."""


_FORWARD = re.compile(rf"[^\n.!?]{{0,{GAP}}}?{SEPARATOR}(?P<v>{TOKEN.pattern}[^\n]*)")


def define(p: Prompt, key: str, whole: bool = True) -> str | None:
    """What the latest definition of `key` gives it: after `key [a few words] SEP`, the rest of
    that line (`whole`) or its first token; or the token before `SEP key`."""
    best: tuple[int, str] | None = None
    for start in p.occurrences(key):
        m = _FORWARD.match(p.context, start + len(key))
        if m:
            value = m["v"] if whole else TOKEN.match(m["v"])[0]  # type: ignore[index]
            if value != key:
                best = (start, value)
    for start, left, right in reversed(p.definitions):
        if best is not None and start < best[0]:
            break
        if right == key and left != key:
            best = (start, left)
            break
    return None if best is None else best[1]


def _definition(p: Prompt) -> str | None:
    quoted = list(_QUOTED.finditer(p.question))
    if quoted:  # a phrase to translate: each word by its definition (plurals by an affix)
        affix = list(_AFFIX.finditer(p.context))
        out = []
        for word in quoted[-1]["phrase"].split():
            value = define(p, word, whole=False)
            if value is None and affix and word.endswith("s"):
                stem = define(p, word[:-1], whole=False)
                value = None if stem is None else stem + affix[-1]["affix"]
            if value is None:
                return None
            out.append(value)
        return " ".join(out)
    for key in p.keys:
        value = define(p, key)
        if value is not None:
            return value
    return None


def _relation(p: Prompt) -> str | None:
    """The context sentence sharing the most (rare-weighted) stems with the question; its
    first value-like token (capitalised or with a digit) that the question lacks, else its
    last new rare token."""
    asked = {stem(t) for t in p.question_tokens}
    best: tuple[float, list[str]] | None = None
    for sentence, words in p.sentences:
        if p.masked(sentence):
            continue
        score = sum(1.0 / max(1, p.counts[t]) for t in set(words) if stem(t) in asked)
        if score and (best is None or score > best[0]):
            best = (score, words)
    if best is None:
        return None
    fresh = [(i, t) for i, t in enumerate(best[1]) if stem(t) not in asked and p.counts[t] <= 2]
    valued = [t for i, t in fresh if (i and t[0].isupper()) or any(c.isdigit() for c in t)]
    return valued[0] if valued else (fresh[-1][1] if fresh else None)


def _last_value(p: Prompt) -> str | None:
    """The last token of the latest context sentence that names the question's key."""
    for key in p.keys:
        for sentence, words in reversed(p.sentences):
            if key in words and not p.masked(sentence) and words[-1] != key:
                return words[-1]
    return None


DEFINITION = Solver(
    "definition", "key/value: the value defined for the last-mentioned key", _definition
)
RELATION = Solver("relation", "the context sentence that best overlaps the question", _relation)
LAST_VALUE = Solver("last_value", "the last value given for the question's name", _last_value)
