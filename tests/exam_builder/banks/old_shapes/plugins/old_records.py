# The built-in family records as it was before issue 28 (exam_builder 1.1.0), kept for the tests:
# its answers are values of the prompt, which a blind guesser or a rule reads.
"""Records: a table of invented entities, then look-ups in it.

    Register of the Velmor guild
    name | home | weight | tool
    Orvak | Tellin | 341 | zimbar
    ...
    The tool of Orvak is zimbar.
    The member whose home is Tellin is Orvak.

Forward look-ups (a cell by row name and column) and reverse look-ups (a row by a cell). Cell
values are unique per column, so a reverse look-up has one answer. Columns and phrases are
bank parameters.
"""

from __future__ import annotations

import random
import re
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from exam_builder.document import Document
from exam_builder.families.base import Family, Params, SolveError, last_line
from exam_builder.families.phrasing import Phrases, template_regex
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
        "forward": ("column", "row"),
        "reverse": ("column", "value"),
    }
    title: str = "Register of the {place} {group}"
    forward: str = "The {column} of {row} is "
    reverse: str = "The member whose {column} is {value} is "


class RecordsParams(Params):
    rows: int = Field(default=5, ge=2, le=12, description="Rows in the table.")
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
    for col in p.columns:
        taken: set[str] = set()
        for n in names:
            table[n][col.name] = _cell(rng, col, lex, taken)
    doc = Document()
    say = p.phrases
    doc.say(say.title.format(place=lex.name(), group=rng.choice(p.groups)) + "\n")
    doc.say("name | " + " | ".join(c.name for c in p.columns) + "\n")
    for n in names:
        doc.say(n + " | " + " | ".join(table[n][c.name] for c in p.columns) + "\n")
    asked: set[tuple[str, str, bool]] = set()
    while len(asked) < min(p.questions, p.rows * len(p.columns)):
        n, col, reverse = rng.choice(names), rng.choice(p.columns), rng.random() < 0.3
        if (n, col.name, reverse) in asked:
            continue
        asked.add((n, col.name, reverse))
        if reverse:
            doc.say(say.reverse.format(column=col.name, value=table[n][col.name]))
            doc.ask(n)
        else:
            doc.say(say.forward.format(column=col.name, row=n))
            doc.ask(table[n][col.name])
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
    header, rows = _table(prompt)
    question = last_line(prompt)
    slots = {"column": r"[a-z]+", "row": r".+", "value": r".+"}
    m = re.fullmatch(template_regex(p.phrases.reverse, **slots), question)
    if m and m.group("column") in header:
        k = header.index(m.group("column"))
        return next(r[0] for r in rows if r[k] == m.group("value"))
    m = re.fullmatch(template_regex(p.phrases.forward, **slots), question)
    if m and m.group("column") in header:
        k = header.index(m.group("column"))
        return next(r[k] for r in rows if r[0] == m.group("row"))
    raise SolveError(f"not a look-up: {question!r}")


FAMILY = Family(
    name="old_records",
    params=RecordsParams,
    generate=generate,
    solve=solve,
    description="tables of invented entities, look-ups",
)
