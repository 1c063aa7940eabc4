"""Solvers that read records: delimited tables with a header, labelled blocks, lists."""

from __future__ import annotations

import re

from exam_builder.document import MASK
from exam_builder.solvers.base import Solver
from exam_builder.solvers.text import Prompt, clean, tokens

_DELIMITERS = ("|", "\t", ";", ",")
_LABEL = re.compile(r"^\s*(?P<label>[A-Za-z][A-Za-z0-9 _-]{0,30}?)\s*:\s*(?P<value>\S.*)$", re.M)
_LIST_SEP = re.compile(r"\s*(?:,|;|->|>|/)\s*")
_ITEM = r"[A-Za-z0-9][A-Za-z0-9'-]*"
_LIST = re.compile(rf"{_ITEM}(?:\s*(?:,|;|->|>|/)\s*{_ITEM}){{2,}}")


def _cells(line: str, delimiter: str) -> list[str]:
    return [c.strip() for c in line.split(delimiter)]


def tables(context: str) -> list[tuple[list[str], list[list[str]]]]:
    """Every (header, rows) of the context: a delimited line of at least two cells followed
    by lines with the same number of cells, split by the same delimiter."""
    lines = context.split("\n")
    out = []
    i = 0
    while i < len(lines):
        for delimiter in _DELIMITERS:
            header = _cells(lines[i], delimiter)
            if len(header) < 2 or not all(header):
                continue
            rows = []
            for line in lines[i + 1 :]:
                cells = _cells(line, delimiter)
                if len(cells) != len(header):
                    break
                rows.append(cells)
            if rows:
                out.append((header, rows))
                i += len(rows)
                break
        i += 1
    return out


def _table_field(p: Prompt) -> str | None:
    """A cell of the row the question names, in the column the question names (or, when the
    question names a cell's own column, the row's first cell: a reverse look-up)."""
    for header, rows in reversed(tables(p.context)):
        named = [k for k, h in enumerate(header) if p.mentions(h)]
        for row in rows:
            for col, cell in enumerate(row):
                if MASK in cell or cell.lower() in (h.lower() for h in header):
                    continue
                if not p.mentions(cell):
                    continue
                other = [k for k in named if k != col]
                if other:
                    return clean(row[other[-1]])
                if col in named and col != 0:
                    return clean(row[0])
    return None


def _labelled_field(p: Prompt) -> str | None:
    """The value of a `Label: value` line named by the question, in the block (blank-line
    separated) that holds another key of the question or whose first line has its number."""
    blocks = [b for b in re.split(r"\n\s*\n", p.context) if b.strip()]
    asked = p.question_tokens
    numbers = [t for t in asked if t.isdigit()]
    for block in reversed(blocks):
        fields = {m["label"].lower(): m["value"].strip() for m in _LABEL.finditer(block)}
        labels = [lab for lab in fields if p.mentions(lab)]
        if not labels:
            continue
        first = tokens(block.strip().split("\n", 1)[0])
        keyed = any(n in first for n in numbers) or any(
            k in tokens(block) and not any(k.lower() in lab.split() for lab in fields)
            for k in p.keys
        )
        if keyed:
            for label in labels:
                value = fields[label]
                if not any(k in tokens(value) for k in p.keys):
                    return clean(value)
    return None


def lists(context: str) -> list[list[str]]:
    """Every list of at least three items in the context (items joined by `,` `;` `->` ...)."""
    return [_LIST_SEP.split(m.group()) for m in _LIST.finditer(context)]


def _list_next(p: Prompt) -> str | None:
    """The item after the question's key in a list; else the k-th item when the question has
    the number k; else the last item of the latest list."""
    found = lists(p.context)
    if not found:
        return None
    for key in p.keys:
        for items in reversed(found):
            if key in items[:-1]:
                return items[items.index(key) + 1]
    numbers = [int(t) for t in p.question_tokens if t.isdigit()]
    if len(numbers) == 1 and 1 <= numbers[0] <= len(found[-1]):
        return found[-1][numbers[0] - 1]
    return found[-1][-1]


TABLE_FIELD = Solver(
    "table_field", "field by position: the column a header names, the row a key names", _table_field
)
LABELLED_FIELD = Solver(
    "labelled_field", "a 'Label: value' field of the record a key or number names", _labelled_field
)
LIST_NEXT = Solver(
    "list_next", "list continuation: the successor, the k-th or last item", _list_next
)
