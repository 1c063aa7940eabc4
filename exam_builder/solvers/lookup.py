"""Solvers that look a key up in the context: definitions, related sentences, last values."""

from __future__ import annotations

import re

from exam_builder.document import MASK
from exam_builder.solvers.base import Solver
from exam_builder.solvers.text import KEY_MAX_COUNT, SEPARATOR, TOKEN, Prompt, stem

_QUOTED = re.compile(r"[\"'](?P<phrase>[^\"'\n]+)[\"']")
_AFFIX = re.compile(r"(?<![A-Za-z0-9])-(?P<affix>[a-z]+)\b")


GAP = 24
"""Characters (a few words, no sentence end) allowed between a key and its separator, as in
`Orvak's badge: KV-4821`."""


_SEPARATED = re.compile(rf"{SEPARATOR}(?P<v>{TOKEN.pattern}.*)")
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


def _translate(p: Prompt, phrase: str) -> str | None:
    """`phrase` word by word through the definitions (a plural `-s` by the latest `-affix` the
    context shows); None when a word has no definition."""
    affix = list(_AFFIX.finditer(p.context))
    out = []
    for word in phrase.split():
        value = define(p, word, whole=False)
        if value is None and affix and word.endswith("s"):
            stem = define(p, word[:-1], whole=False)
            value = None if stem is None else stem + affix[-1]["affix"]
        if value is None:
            return None
        out.append(value)
    return " ".join(out)


def _definition(p: Prompt) -> str | None:
    """A quoted phrase of the question translated; else the latest definition of the
    question's first key that has one (see `define`)."""
    quoted = list(_QUOTED.finditer(p.question))
    if quoted and (phrase := _translate(p, quoted[-1]["phrase"])) is not None:
        return phrase
    for key in p.keys:
        value = define(p, key)
        if value is not None:
            return value
    return None


def _relation(p: Prompt) -> str | None:
    """The context sentence sharing the most (rare-weighted) stems with the question, from its
    first value-like token (capitalised or with a digit) that the question lacks, else from
    its last new rare token."""
    asked = {stem(t) for t in p.question_tokens}
    best: tuple[float, str, list[str]] | None = None
    for sentence, words in p.sentences:
        if p.masked(sentence):
            continue
        score = sum(1.0 / max(1, p.counts[t]) for t in set(words) if stem(t) in asked)
        if score and (best is None or score > best[0]):
            best = (score, sentence, words)
    if best is None:
        return None
    _, sentence, words = best
    fresh = [i for i, t in enumerate(words) if stem(t) not in asked and p.counts[t] <= 2]
    valued = [
        i for i in fresh if (i and words[i][0].isupper()) or any(c.isdigit() for c in words[i])
    ]
    if not fresh:
        return None
    start = list(TOKEN.finditer(sentence))[valued[0] if valued else fresh[-1]].start()
    return sentence[start:]  # the rest of the sentence: the answer may be several words


def _last_value(p: Prompt) -> str | None:
    """In the latest context sentence that names the question's key: what follows the key's
    separator (`X = 7`, `X: at Vosk`), else the sentence's last token."""
    for key in p.keys:
        for sentence, words in reversed(p.sentences):
            if key not in words or p.masked(sentence):
                continue
            at = sentence.rfind(key)
            m = _SEPARATED.match(sentence, at + len(key)) if at >= 0 else None
            if m:
                return m["v"]
            if words[-1] != key:
                return words[-1]
    return None


_CLAUSE_END = re.compile(r"[.!?;](?:\s|$)|\n")
MAX_MENTIONS = 8
"""Latest mentions of a key `after_key` looks behind (this bounds its work)."""
WORDING_SKIP = 6
"""Wording tokens `after_key` skips at most between a key and its value."""


def _after_key(p: Prompt) -> str | None:
    """After the latest mention of the question's key (outside earlier questions), within its
    clause and its next `WORDING_SKIP` + 1 tokens: the text from the first value-like token
    (capitalised or with a digit) that is not wording (frequent in the context), else from the
    first rare one: `Orvak zimbar`, `Orvak lives in Vosk`, `Orvak comes before Tellin`."""
    for key in p.keys:
        for start in p.occurrences(key)[-MAX_MENTIONS:][::-1]:
            end = _CLAUSE_END.search(p.context, start + len(key))
            clause = p.context[start + len(key) : end.start() if end else len(p.context)]
            if p.masked(clause) or MASK in clause:
                continue
            near = [m for m in TOKEN.finditer(clause)][: WORDING_SKIP + 1]
            rare = [m for m in near if p.counts[m.group()] <= KEY_MAX_COUNT and m.group() != key]
            valued = [
                m for m in rare if m.group()[0].isupper() or any(c.isdigit() for c in m.group())
            ]
            if rare:
                return clause[(valued or rare)[0].start() :]
    return None


DEFINITION = Solver(
    "definition", "key/value: the value defined for the last-mentioned key", _definition
)
RELATION = Solver("relation", "the context sentence that best overlaps the question", _relation)
LAST_VALUE = Solver("last_value", "the last value given for the question's name", _last_value)
AFTER_KEY = Solver(
    "after_key", "the first non-wording word after the key's latest mention", _after_key
)
