"""The chance floor: what a blind guesser scores by picking a value of the answer's shape.

A guesser that knows no family and no word can still score: it picks, for each question, one
of the prompt's values that look like an answer (a capitalised word, a number, a clock time, a
code like `KX-4821`, a field of a record...). When a family leaves 4 such values, it scores 25%
per question without reading anything. The gate measures that floor so that no family keeps
one: every family must have enough same-shape distractors, or answers that are computed and
so appear nowhere in the prompt.

The answer's *shape* replaces every run of capitals, of small letters and of digits by a class
and keeps every other character (`Orvak` -> `A a`, `09:40` -> `9:9`, `KX-4821` -> `A-9`,
`zimbar for dessa` -> `a a a`). The guesser is assumed to know that shape (a generous
assumption: the floor is an upper bound on blind guessing). Its candidate sets, one per
strategy (`STRATEGIES`):

- `shape`: every distinct span of the prompt with the answer's shape;
- `once`: those spans that occur exactly once in the prompt (a value is often named once,
  its key several times);
- `fields`: the prompt's field values of that shape: a line or sentence cut at field
  separators (`: `, ` | `, `, `, `; `, ` = `, ` -> `, tabs), each piece that is entirely of
  the answer's shape;
- `joined`: the prompt's whitespace-separated chunks with every byte that is not a letter or
  a digit dropped (`q.z.w` -> `qzw`), whole or less their first or last run (a key glued to
  its value: `Kq.z.w` -> `qzw`), each that is entirely of the answer's shape: a register's
  entries, however its separator splits them;
- `record`: the spans of that shape in the records (lines or sentences) that the question
  points to (those sharing a rare token with the question's line), less the question's own
  tokens: "the other fields of the record the question points to".

Computed answers are not safe from guessing either: a guesser can combine the prompt's numbers
without knowing which to combine. For an answer that is a number or a clock time:

- `arith`: every `a + b`, `a - b` and `a * b` of two numbers of the prompt (the last
  `MAX_NUMBERS` distinct ones), of the answer's shape;
- `arith-record`: the same with `a` from the records the question points to (a clock time there
  plus any number, or plus all of those records' numbers, for a time);
- `signs`: the first number of the records naming the question's key (its rarest name-like
  token) plus each of their other numbers with a sign drawn at random (a running count whose
  direction the guesser cannot read): right with the share of sign choices that give the
  answer.

One more strategy reads no prompt at all:

- `prior`: the best constant guess of the family, from its answers' distribution (a family
  whose answers are often `12`, or often start with the same letters, is guessed without a
  prompt). It is measured on `PRIOR_SAMPLE` answers of the family generated for this purpose
  (documents after the exam's), so that a small family's few answers do not decide it.

A question's chance under a strategy is 1/|candidates| when the answer is a candidate, else
0 (a candidate is right when it *starts* with the answer, as the grader judges a prefix). A
family's chance floor is, over the strategies, the highest mean: what the best single blind
strategy scores on it. Computed answers (a sum, a reversed list, an arrival time) are in no
candidate set, so they cost nothing.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

STRATEGIES: tuple[str, ...] = (
    "shape",
    "once",
    "fields",
    "joined",
    "record",
    "arith",
    "arith-record",
    "signs",
)
STRATEGIES += ("prior",)
"""The blind strategies, in the order the gate reports them."""

CHANCE_LIMIT = 2.0
"""Highest chance floor (percent) a family may have; a bank may only lower it."""

PRIOR_SAMPLE = 2000
"""Answers of a family generated to measure the `prior` strategy."""

MAX_NUMBERS = 24
"""The `arith` strategies combine at most this many distinct numbers of the prompt."""
MAX_SIGNS = 12
"""`signs` draws at most this many signs (2^12 sums)."""

RARE_RECORDS = 3
"""A question's token points to the records holding it when it occurs in at most this many."""

_RUN = re.compile(r"[A-Z]+|[a-z]+|[0-9]+|[^A-Za-z0-9]")
_CLASS = {"A": "[A-Z]+", "a": "[a-z]+", "9": "[0-9]+"}
_ALNUM = "A-Za-z0-9"
_TOKEN = re.compile(r"[A-Za-z0-9]{2,}")
_RECORD_CUT = re.compile(r"\n|(?<=[.!?])\s+")
_FIELD_CUT = re.compile(r": |\s\|\s|, |; | = | -> |\t")
_WORD = re.compile(r"[A-Za-z0-9]+(?:[-:@.][A-Za-z0-9]+)*")
_CLOCK = re.compile(r"(\d\d?):(\d\d)")


def shape_of(answer: str) -> str:
    """The answer's shape as a readable pattern (`Orvak` -> `Aa`, `KX-4821` -> `A-9`)."""
    out = []
    for run in _RUN.findall(answer):
        if run[0].isupper() and run.isalpha():
            out.append("A")
        elif run[0].islower() and run.isalpha():
            out.append("a")
        elif run.isdigit():
            out.append("9")
        else:
            out.append(run)
    return "".join(out)


def _shape_body(answer: str) -> str:
    return "".join(_CLASS.get(c, re.escape(c)) for c in shape_of(answer))


def shape_regex(answer: str) -> re.Pattern[str]:
    """A regex for spans of the answer's shape, never part of a longer word or number."""
    return re.compile(rf"(?<![{_ALNUM}])(?=({_shape_body(answer)})(?![{_ALNUM}]))")


def _spans(pattern: re.Pattern[str], text: str) -> list[str]:
    """Every span of `text` matching `pattern` (overlapping ones too), in order."""
    return [m[1] for m in pattern.finditer(text)]


def _unique(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def _numbers(text: str) -> list[int]:
    """The plain numbers of `text` (not the parts of a time, a date or a code), in order."""
    return [int(w) for w in _WORD.findall(text) if w.isdigit() and len(w) <= 12]


def _clocks(text: str) -> list[int]:
    """The clock times of `text`, in minutes after midnight."""
    return [
        60 * int(h) + int(m)
        for w in _WORD.findall(text)
        if (t := _CLOCK.fullmatch(w))
        for h, m in [t.groups()]
    ]


def _combined(left: list[int], right: list[int], whole: re.Pattern[str]) -> list[str]:
    """`a + b`, `a - b`, `b - a` and `a * b` for `a` in `left`, `b` in `right` (distinct
    positions when both are the same list), as text of the answer's shape."""
    out = []
    same = left is right
    for i, a in enumerate(left):
        for j, b in enumerate(right):
            if same and i == j:
                continue
            out += [str(a + b), str(a - b), str(b - a), str(a * b)]
    return [v for v in _unique(out) if whole.fullmatch(v)]


def _clock_text(minutes: int) -> str:
    return f"{minutes // 60 % 24:02d}:{minutes % 60:02d}"


def signs_chance(numbers: list[int], answer: str) -> float:
    """The share of sign choices s for which numbers[0] + sum(s_i * numbers[i]) == answer."""
    if not numbers or not re.fullmatch(r"-?\d+", answer):
        return 0.0
    rest = numbers[1 : MAX_SIGNS + 1]
    sums: Counter[int] = Counter([numbers[0]])
    for n in rest:
        nxt: Counter[int] = Counter()
        for total, ways in sums.items():
            nxt[total + n] += ways
            nxt[total - n] += ways
        sums = nxt
    return sums[int(answer)] / (1 << len(rest))


def _pointed(prompt: str) -> tuple[list[str], set[str], list[int], list[int]]:
    """The prompt's records (lines, sentences; the question line left out), the question's
    tokens, and the records it points to: those holding a token of the question that at most
    `RARE_RECORDS` records hold, or its rarest name-like token (the key); and the key's
    records alone."""
    body, _, question = prompt.rpartition("\n")
    records = [r for r in _RECORD_CUT.split(body) if r.strip()]
    asked = set(_TOKEN.findall(question))
    holding: dict[str, list[int]] = {t: [] for t in asked}
    for i, record in enumerate(records):
        for t in asked.intersection(_TOKEN.findall(record)):
            holding[t].append(i)
    rare = {i for held in holding.values() if len(held) <= RARE_RECORDS for i in held}
    # The question's key: its rarest name-like token (a capital or a digit), however often the
    # prompt names it (a running count names its person in every hand-over).
    names = [t for t, held in holding.items() if held and not t.islower()]
    keyed: list[int] = []
    if names:
        keyed = holding[min(names, key=lambda t: (len(holding[t]), t))]
        rare.update(keyed)
    return records, asked, sorted(rare), keyed


def candidates(prompt: str, answer: str) -> dict[str, list[str]]:
    """The candidate set of every strategy for one question (see the module docstring)."""
    pattern = shape_regex(answer)
    spans = _spans(pattern, prompt)
    counts: dict[str, int] = {}
    for s in spans:
        counts[s] = counts.get(s, 0) + 1
    records, asked, pointed, _ = _pointed(prompt)
    whole = re.compile(_shape_body(answer))
    fields = [
        f
        for record in records
        for f in _FIELD_CUT.split(record.strip().rstrip(".!?"))
        if whole.fullmatch(f)
    ]
    near = [s for i in pointed for s in _spans(pattern, records[i]) if not asked.intersection([s])]
    body = prompt.rpartition("\n")[0]
    joined = [j for chunk in body.split() for j in _joined(chunk) if whole.fullmatch(j)]
    arith: list[str] = []
    arith_record: list[str] = []
    if re.fullmatch(r"-?\d+", answer):
        numbers = _unique(str(n) for n in _numbers(prompt))[-MAX_NUMBERS:]
        values = [int(n) for n in numbers]
        arith = _combined(values, values, whole)
        mine = _unique(str(n) for i in pointed for n in _numbers(records[i]))[:MAX_NUMBERS]
        arith_record = _combined([int(n) for n in mine], values, whole)
    elif _CLOCK.fullmatch(answer):
        minutes = _numbers(prompt)[-MAX_NUMBERS:]
        total = sum(n for i in pointed for n in _numbers(records[i]))
        starts = [t for i in pointed for t in _clocks(records[i])]
        arith_record = _unique(_clock_text(t + m) for t in starts for m in [*minutes, total])
    return {
        "shape": _unique(spans),
        "once": [s for s in _unique(spans) if counts[s] == 1],
        "fields": _unique(fields),
        "joined": _unique(joined),
        "record": _unique(near),
        "arith": arith,
        "arith-record": arith_record,
    }


def _joined(chunk: str) -> list[str]:
    """`chunk`'s letters and digits joined, whole and less its first or its last run."""
    runs = re.findall(r"[A-Z]+|[a-z]+|[0-9]+", chunk)
    if not runs:
        return []
    out = ["".join(runs)]
    if len(runs) > 1:
        out += ["".join(runs[1:]), "".join(runs[:-1])]
    return out


def best_constant(answers: Iterable[str]) -> tuple[str, float]:
    """The constant guess that is right most often, and how often (a fraction): a guess is
    right when it starts with the answer, so the best one is always one of the answers."""
    counts = Counter(answers)
    total = sum(counts.values())
    best, hits = "", 0
    for guess in sorted(counts):
        right = sum(counts.get(guess[:k], 0) for k in range(1, len(guess) + 1))
        if right > hits:
            best, hits = guess, right
    return best, hits / total if total else 0.0


def question_chance(prompt: str, answer: str) -> dict[str, float]:
    """Per prompt-reading strategy (all but `prior`), the probability that a uniform pick
    among its candidates is right."""
    out = {}
    for strategy, found in candidates(prompt, answer).items():
        right = sum(c.startswith(answer) for c in found)
        out[strategy] = right / len(found) if found else 0.0
    records, _, _, keyed = _pointed(prompt)
    out["signs"] = signs_chance([n for i in keyed for n in _numbers(records[i])], answer)
    return out
