"""Records: a table of invented entities, then look-ups in it.

    Register of the Velmor guild
    name | home | weight | tool
    Orvak | Tellin | 341 | zimbar
    ...
    Where Dessa has 517, Orvak and Mira have 341 and 802.
    The holders of zimbar and KV-4821: Orvak and Mira.

Forward look-ups name two rows and find their cells in a column that the question never names:
it gives another row's cell instead, so the column must be found by its value (a rule that
matches the question's words to a header finds nothing). Reverse look-ups give two cells and
ask whose they are. Every answer joins two cells (`both`), so it is written nowhere in the
table and a blind pick among its cells scores nothing. Cells are unique in the whole table, so
every look-up has one answer. Columns and phrases are bank parameters.
"""

from __future__ import annotations

import random
import re
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from exam_builder.document import Document
from exam_builder.families.base import Family, SolveError, last_line
from exam_builder.families.phrasing import Phrases, template_regex
from exam_builder.families.register import Register, RegisterParams, lookup_field, with_register
from exam_builder.lexicon import Lexicon


class Column(BaseModel):
    """A table column: invented words, capitalised names, numbers, or codes like 'KV-4821'."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z]+$", description="Header, one lowercase word.")
    kind: Literal["word", "name", "number", "code"] = Field(description="What the cells hold.")
    low: int = Field(default=100, ge=0, description="Smallest number (kind 'number').")
    high: int = Field(default=999, ge=0, description="Largest number (kind 'number').")


DEFAULT_COLUMNS = [
    Column(name="home", kind="name"),
    Column(name="weight", kind="number", low=100, high=999),
    Column(name="tool", kind="word"),
    Column(name="badge", kind="code"),
]


class RecordsPhrases(Phrases):
    """Wording; {column} is a column header, {row} a row's name, {value} a cell."""

    SLOTS: ClassVar[dict[str, tuple[str, ...]]] = {
        "title": ("place", "group"),
        "forward": ("key", "value", "row", "other"),
        "reverse": ("value", "other"),
        "both": ("first", "second"),
    }
    title: str = "Register of the {place} {group}"
    forward: str = "Where {key} has {value}, {row} and {other} have "
    reverse: str = "The holders of {value} and {other}: "
    both: str = "{first} and {second}"


class RecordsParams(RegisterParams):
    lookup: Register = lookup_field("Lockers", "locker {key}")
    rows: int = Field(
        default=5, ge=3, le=12, description="Rows in the table (a look-up names three)."
    )
    columns: list[Column] = Field(
        default_factory=lambda: list(DEFAULT_COLUMNS), min_length=1, description="Columns."
    )
    groups: list[str] = Field(
        default_factory=lambda: ["guild", "crew", "clan", "league"],
        min_length=1,
        description="What the table lists (a word for the title).",
    )
    phrases: RecordsPhrases = Field(default_factory=RecordsPhrases, description="Wording.")

    @model_validator(mode="after")
    def _columns_ok(self) -> RecordsParams:
        names = [c.name for c in self.columns]
        if len(set(names)) != len(names) or "name" in names:
            raise ValueError("column names must be distinct and not 'name'")
        for c in self.columns:
            if c.kind == "number" and c.high - c.low + 1 < self.rows:
                raise ValueError(f"column {c.name}: range {c.low}..{c.high} too small for rows")
        return self


def _cell(rng: random.Random, col: Column, lex: Lexicon, taken: set[str]) -> str:
    while True:
        if col.kind == "word":
            v = lex.word()
        elif col.kind == "name":
            v = lex.name()
        elif col.kind == "number":
            v = str(rng.randint(col.low, col.high))
        else:
            letters = "".join(rng.choice("BCDFGHJKLMNPQRSTVWXZ") for _ in range(2))
            v = f"{letters}-{rng.randint(1000, 9999)}"
        if v not in taken:
            taken.add(v)
            return v


def generate(rng: random.Random, p: RecordsParams, lex: Lexicon) -> Document:
    names = lex.names(p.rows)
    table: dict[str, dict[str, str]] = {n: {} for n in names}
    taken: set[str] = set(names)  # unique in the whole table: a cell names its column
    for col in p.columns:
        for n in names:
            table[n][col.name] = _cell(rng, col, lex, taken)
    doc = Document()
    say = p.phrases
    doc.say(say.title.format(place=lex.name(), group=rng.choice(p.groups)) + "\n")
    doc.say("name | " + " | ".join(c.name for c in p.columns) + "\n")
    for n in names:
        doc.say(n + " | " + " | ".join(table[n][c.name] for c in p.columns) + "\n")
    asked: set[str] = set()  # membership only
    for _ in range(100 * p.questions):
        if len(asked) == p.questions:
            break
        key, row, other = rng.sample(names, 3)
        col, col2 = rng.choice(p.columns), rng.choice(p.columns)
        if rng.random() < 0.3:
            question = say.reverse.format(value=table[row][col.name], other=table[other][col2.name])
            answer = say.both.format(first=row, second=other)
        else:
            value = table[key][col.name]
            question = say.forward.format(key=key, value=value, row=row, other=other)
            answer = say.both.format(first=table[row][col.name], second=table[other][col.name])
        if question in asked:
            continue
        asked.add(question)
        doc.say(question)
        doc.ask(answer)
        doc.say(".\n")
    return doc


def _table(prompt: str) -> tuple[list[str], list[list[str]]]:
    lines = prompt.split("\n")
    for i, line in enumerate(lines):
        if line.startswith("name | "):
            header = line.split(" | ")
            rows = []
            for row in lines[i + 1 :]:
                cells = row.split(" | ")
                if len(cells) != len(header):
                    break
                rows.append(cells)
            return header, rows
    raise SolveError("no table header in the prompt")


def solve(prompt: str, p: RecordsParams) -> str:
    _, rows = _table(prompt)
    by_name = {r[0]: r for r in rows}
    question = last_line(prompt)
    say = p.phrases
    slots = {s: r".+?" for s in ("key", "value", "row", "other")}

    def holder(value: str) -> str:
        return next(r[0] for r in rows if value in r[1:])

    m = re.fullmatch(template_regex(say.forward, **slots), question)
    if m and m["key"] in by_name and m["value"] in by_name[m["key"]]:
        k = by_name[m["key"]].index(m["value"])
        return say.both.format(first=by_name[m["row"]][k], second=by_name[m["other"]][k])
    m = re.fullmatch(template_regex(say.reverse, **slots), question)
    if m:
        try:
            return say.both.format(first=holder(m["value"]), second=holder(m["other"]))
        except StopIteration:
            pass
    raise SolveError(f"not a look-up: {question!r}")


_generate, _solve = with_register(generate, solve)

FAMILY = Family(
    name="records",
    params=RecordsParams,
    generate=_generate,
    solve=_solve,
    tiers=(2, 1),
    description="tables of invented entities, look-ups",
)
