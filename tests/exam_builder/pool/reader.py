"""Red-team pool, test copy: the structure reader of issue 28, one solver per rule. Each rule
is general (written once from the maintainers' guide and the families' shapes, never fitted to
one bank): a two-hop walk through relations, running counts by to/from, operation words applied
to their nearest number, a record field chosen by cue words, a start time plus minutes, and
each/every as a product. A maintainer keeps such files in a hidden bank's `solvers/` folder."""

from __future__ import annotations

import re

from exam_builder.solvers.base import Solver
from exam_builder.solvers.text import Prompt

_CUT = re.compile(r"\n|(?<=[.!?])\s+")
_NAME = re.compile(r"\b[A-Z][a-z]+\b")
_INT = re.compile(r"-?\b\d+\b")
_TOKEN = re.compile(r"[A-Za-z0-9]+(?:[-:@.][A-Za-z0-9]+)*")


def _records(p: Prompt) -> list[str]:
    return [r for r in _CUT.split(p.context) if r.strip()]


def _asked_names(p: Prompt) -> list[str]:
    return [n for n in _NAME.findall(p.question) if n in p.context]


def two_hop(p: Prompt) -> str | None:
    """From the asked name X, X -> Y -> Z (a sentence's first and last names), Z seen once."""
    edges = []
    for r in _records(p):
        names = _NAME.findall(r)
        if len(names) == 2:
            edges.append((names[0], names[1]))
    for x in _asked_names(p):
        for a, y in edges:
            if a != x:
                continue
            for b, z in edges:
                if b == y and z != x and p.context.count(z) == 1:
                    return z
    return None


def running_count(p: Prompt) -> str | None:
    """The asked name's count: its opening number, plus what goes to it, less what leaves it."""
    for x in _asked_names(p):
        total, moved = None, False
        for r in _records(p):
            words = r.rstrip(".").split()
            numbers = _INT.findall(r)
            if x not in words or len(numbers) != 1:
                continue
            n = int(numbers[0])
            if "to" in words or "from" in words:
                prep = "to" if "to" in words else "from"
                after = words[words.index(prep) + 1] if words.index(prep) + 1 < len(words) else ""
                gains = (after == x) == (prep == "to")
                total = (total or 0) + (n if gains else -n)
                moved = True
            elif total is None:
                total = n
        if moved and total is not None:
            return str(total)
    return None


_OPS = {
    "times": "*",
    "multiply": "*",
    "multiplied": "*",
    "double": "*2",
    "triple": "*3",
    "plus": "+",
    "add": "+",
    "added": "+",
    "minus": "-",
    "subtract": "-",
    "less": "-",
}


def operation_words(p: Prompt) -> str | None:
    """The question's number through the operation words of the latest line that has some,
    each applied to its nearest number, in reading order."""
    xs = _INT.findall(p.question)
    if not xs:
        return None
    value = int(xs[-1])
    for line in reversed(p.context.split("\n")):
        words = re.findall(r"[a-z]+|-?\d+", line.lower())
        ops = [i for i, w in enumerate(words) if w in _OPS]
        if not ops:
            continue
        for i in ops:
            op = _OPS[words[i]]
            if len(op) == 2:
                value *= int(op[1])
                continue
            near = sorted(  # the nearest number; on a tie, the one after the word
                (abs(j - i), j < i, int(w))
                for j, w in enumerate(words)
                if re.fullmatch(r"-?\d+", w)
            )
            if not near:
                return None
            n = near[0][2]
            value = value * n if op == "*" else value + n if op == "+" else value - n
        return str(value)
    return None


_CUES = [
    (("address", "mail", "email"), re.compile(r"[a-z.]+@[a-z.]+[a-z]")),
    (("sent", "when", "left", "date", "time"), re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d")),
    (("ref", "filed", "under", "code", "reference"), re.compile(r"\b[A-Z]{2}-\d{4}\b")),
    (("about", "subject", "topic", "wrote"), re.compile(r"(?<=Subject: )[^\n]+")),
    (("who", "whoever", "sender", "by"), re.compile(r"\b[A-Z][a-z]+ [A-Z][a-z]+\b")),
]


def record_field(p: Prompt) -> str | None:
    """In the block (paragraph) holding the question's key, the field its cue words name."""
    q_words = set(re.findall(r"[a-z]+", p.question.lower()))
    keys = [t for t in _TOKEN.findall(p.question) if not t.islower()]
    keys += re.findall(r"\b[A-Z][a-z]+ [A-Z][a-z]+\b", p.question)
    blocks = [b for b in p.context.split("\n\n") if b.strip()]
    for cues, pattern in _CUES:
        if not q_words.intersection(cues):
            continue
        for key in keys:
            for block in blocks:
                if re.search(rf"(?<![\w-]){re.escape(key)}(?![\w-])", block):
                    found = [v for v in pattern.findall(block) if v != key]
                    if found:
                        return found[0]
    return None


_CLOCK = re.compile(r"\b(\d\d):(\d\d)\b")


def start_plus_minutes(p: Prompt) -> str | None:
    """The asked name's start time plus every `N min` of the lines that name it."""
    for x in _asked_names(p):
        start, minutes = None, 0
        for r in _records(p):
            if x not in _NAME.findall(r):
                continue
            clock = _CLOCK.search(r)
            if clock and start is None:
                start = int(clock[1]) * 60 + int(clock[2])
            minutes += sum(int(m) for m in re.findall(r"(\d+)\s*min", r))
        if start is not None and minutes:
            t = start + minutes
            return f"{t // 60 % 24:02d}:{t % 60:02d}"
    return None


def each_product(p: Prompt) -> str | None:
    """`N ... M each` / `every ... N ... M`: the product of the pointed sentence's numbers."""
    for x in _asked_names(p) or [""]:
        for r in _records(p):
            if x in r and re.search(r"\b(each|every|per|apiece)\b", r):
                numbers = [int(n) for n in _INT.findall(r)]
                if len(numbers) >= 2:
                    return str(numbers[0] * numbers[1])
    return None


SOLVERS = [
    Solver("reader-two-hop", "two-hop relation walk to a value seen once", two_hop),
    Solver("reader-count", "running count: to gains, from loses", running_count),
    Solver("reader-operation", "operation word applied to its nearest number", operation_words),
    Solver("reader-field", "record field chosen by cue words", record_field),
    Solver("reader-clock", "start time plus cumulative minutes", start_plus_minutes),
    Solver("reader-each", "each/every as a product", each_product),
]
