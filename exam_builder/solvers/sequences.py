"""Solvers that compute: number progressions, clock arithmetic, string rules from examples."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from fractions import Fraction

from exam_builder.document import MASK
from exam_builder.families.symbolic import FIXED_RULES
from exam_builder.solvers.base import Solver
from exam_builder.solvers.text import Prompt, tokens

_INT = re.compile(r"(?<![\w:.-])-?\d+(?![\w:.]\d|\w)")
_CLOCK = re.compile(r"(?<!\d)(?P<h>[01]?\d|2[0-3]):(?P<m>[0-5]\d)(?!\d)")
MAX_EXAMPLES = 8
"""Example lines whose affixes the string-rule solver tries as rules."""
MAX_RUN = 12
"""The most trailing numbers of the prompt the progression solver fits."""
MAX_TERM = 1000
"""The furthest term a progression solver computes."""


def rule_of(terms: list[int]) -> Callable[[int], int] | None:
    """term(n) (1-based) of a progression fitting every term: arithmetic, geometric,
    constant second difference, or each term the sum of the two before; None if none fits."""
    if len(terms) < 3:
        return None
    d = [y - x for x, y in itertools.pairwise(terms)]
    if len(set(d)) == 1:
        return lambda n: terms[0] + (n - 1) * d[0]
    if terms[0] and terms[1] % terms[0] == 0:
        r = terms[1] // terms[0]
        if all(y == x * r for x, y in itertools.pairwise(terms)):
            return lambda n: terms[0] * r ** (n - 1)
    dd = [y - x for x, y in itertools.pairwise(d)]
    if len(set(dd)) == 1:
        return lambda n: terms[0] + d[0] * (n - 1) + dd[0] * (n - 1) * (n - 2) // 2
    if all(terms[i] == terms[i - 1] + terms[i - 2] for i in range(2, len(terms))):

        def fib(n: int) -> int:
            x, y = terms[0], terms[1]
            for _ in range(n - 1):
                x, y = y, x + y
            return x

        return fib
    return None


def _progression(p: Prompt) -> str | None:
    """Continue the numbers the prompt ends with (at least three on the question line, or,
    when it has none, the longest run of the context's last numbers that fits); else the
    latest line of at least three numbers: its next term, or term k when the question holds
    one number k (or ordinal) beyond the terms shown."""
    asked = [int(t) for t in _INT.findall(p.question)]
    if len(asked) >= 3 and (rule := rule_of(asked)) is not None:
        return str(rule(len(asked) + 1))
    index = p.indices
    if not index:
        last = [int(t) for t in _INT.findall(p.context)][-MAX_RUN:]
        for size in range(len(last), 2, -1):
            if (rule := rule_of(last[-size:])) is not None:
                return str(rule(size + 1))
    for line in reversed(p.context.split("\n")):
        terms = [int(t) for t in _INT.findall(line)]
        rule = rule_of(terms)
        if rule is None:
            continue
        n = len(terms) + 1
        if len(index) == 1 and len(terms) < index[0] <= MAX_TERM:
            n = index[0]
        return str(rule(n))
    return None


def _shaped(p: Prompt) -> list[tuple[list[int], int]]:
    """(inputs, output) of the context lines shaped like the question (the same text once
    numbers are blanked, up to the question's end): inputs at the question's numbers' places,
    output the number after them."""
    shape = _INT.sub("#", p.question)
    width = len(_INT.findall(p.question))
    points = []
    for line in p.context.split("\n"):
        if MASK in line or not _INT.sub("#", line).startswith(shape):
            continue
        numbers = [int(t) for t in _INT.findall(line)]
        if len(numbers) > width:
            points.append((numbers[:width], numbers[width]))
    return points


def _number_rule(p: Prompt) -> str | None:
    """A number rule fitted to earlier lines shaped like the question: with no input, their
    outputs continued as a progression; with one input x, a progression over x (when the x
    step evenly) or else y = a*x + b through every line."""
    points = _shaped(p)
    asked = [int(t) for t in _INT.findall(p.question)]
    if len(points) < 2 or len(asked) > 1:
        return None
    if not asked:
        rule = rule_of([y for _, y in points])
        return None if rule is None else str(rule(len(points) + 1))
    pts = sorted({x[0]: y for x, y in points}.items())
    if len(pts) < 2:
        return None
    x = asked[0]
    steps = {b[0] - a[0] for a, b in itertools.pairwise(pts)}
    if len(steps) == 1 and (x - pts[0][0]) % (step := steps.pop()) == 0:
        rule = rule_of([y for _, y in pts])
        n = (x - pts[0][0]) // step + 1
        if rule is not None and 1 <= n <= MAX_TERM:
            return str(rule(n))
    (x0, y0), (x1, y1) = pts[0], pts[1]
    a = Fraction(y1 - y0, x1 - x0)
    b = y0 - a * x0
    if all(a * xi + b == yi for xi, yi in pts):
        y = a * x + b
        return str(y.numerator) if y.denominator == 1 else None
    return None


def _minutes(m: re.Match[str]) -> int:
    return int(m["h"]) * 60 + int(m["m"])


def _clock(p: Prompt) -> str | None:
    """When the question holds a time: the context line (from its start) whose time comes
    next. Otherwise a clock time plus a number of minutes, both on the latest line naming the
    key."""
    asked = list(_CLOCK.finditer(p.question))
    if len(asked) == 1:
        after = _minutes(asked[0])
        later = [
            (_minutes(m), line.strip())
            for line in p.context.split("\n")
            if MASK not in line and (m := _CLOCK.search(line)) and _minutes(m) > after
        ]
        return min(later)[1] if later else None
    for key in p.keys:
        for line, words in reversed(p.sentences):
            if key not in words:
                continue
            times = list(_CLOCK.finditer(line))
            rest = _CLOCK.sub(" ", line)
            minutes = [int(t) for t in _INT.findall(rest)]
            if len(times) == 1 and len(minutes) == 1:
                total = _minutes(times[0]) + minutes[0]
                return f"{total // 60 % 24:02d}:{total % 60:02d}"
    return None


def _appender(affix: str, at_end: bool) -> Callable[[str], str]:
    return (lambda w: w + affix) if at_end else (lambda w: affix + w)


def _affix_rules(source: str, target: str) -> dict[str, Callable[[str], str]]:
    """The public rule list, plus the suffix or prefix that turns `source` into `target`."""
    rules = dict(FIXED_RULES)
    extra = len(target) - len(source)
    if extra > 0 and target.startswith(source):
        rules["suffix"] = _appender(target[len(source) :], at_end=True)
    if extra > 0 and target.endswith(source):
        rules["prefix"] = _appender(target[:extra], at_end=False)
    return rules


def _string_rule(p: Prompt) -> str | None:
    """Example lines that start like the question pair a source token (at some position i of
    the question) with the token that follows the question's length; the string rule (of the
    public rule list, or an affix) that explains the most examples is applied to token i."""
    asked = p.question_tokens
    j = len(asked)
    examples = [t for t in (tokens(line) for line in p.context.split("\n")) if len(t) > j]
    best: tuple[int, str] | None = None
    for i in range(j):
        pairs = [(t[i], t[j]) for t in examples]
        rules = {}
        for pair in pairs[:MAX_EXAMPLES]:
            rules.update({(n, r(asked[i])): r for n, r in _affix_rules(*pair).items()})
        for (_, guess), rule in rules.items():
            fits = sum(rule(s) == d for s, d in pairs)
            if fits >= 2 and (best is None or fits > best[0]):
                best = (fits, guess)
    return None if best is None else best[1]


PROGRESSION = Solver(
    "progression", "arithmetic, geometric, quadratic or additive numbers continued", _progression
)
NUMBER_RULE = Solver(
    "number_rule", "a number rule fitted to earlier lines shaped like the question", _number_rule
)
CLOCK = Solver("clock", "a time plus the minutes beside the key, or the next time listed", _clock)
STRING_RULE = Solver("string_rule", "a string rule induced from example pairs", _string_rule)
