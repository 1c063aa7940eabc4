"""Solvers that read records: delimited tables with a header, labelled blocks, lists."""

from __future__ import annotations

import re

from exam_builder.document import MASK
from exam_builder.solvers.base import Solver
from exam_builder.solvers.text import Prompt, clean, tokens

_DELIMITERS = ("|", "\t", ";", ",", "  ")
"""Cell delimiters of a table, tried in this order (two spaces: aligned columns)."""
_FIELD = re.compile(
    r"(?:^|(?<=[\s;,|]))(?P<label>[A-Za-z][A-Za-z0-9_-]*)[^\S\n]*[:=][^\S\n]*(?P<value>[^;,|\n]+)",
    re.M,
)
_JOIN = r"(?:\s*(?:,\s*(?:and|then)\s|,|;|->|>|/|\u2192)\s*|\s+(?:then|and)\s+)"
_LIST_SEP = re.compile(_JOIN)
_ITEM = r"(?<![A-Za-z0-9'-])[A-Za-z0-9][A-Za-z0-9'-]*+"
_LIST = re.compile(rf"{_ITEM}(?:{_JOIN}{_ITEM}){{2,}}")
_ENUMERATED = re.compile(r"^\s*(?:\d+[.):]|[-*+\u2022]|#\d+)\s+(?P<item>\S.*?)\s*$")
MAX_ITEM_WORDS = 4
"""Most words of one list item (a longer part is prose, not an item)."""


def _cells(line: str, delimiter: str) -> list[str]:
    line = line.strip()
    if delimiter in "|" and line.startswith(delimiter) and line.endswith(delimiter):
        line = line[1:-1]  # a framed row: | a | b |
    if delimiter == "  ":
        return re.split(r" {2,}", line)
    return [c.strip() for c in line.split(delimiter)]


def tables(context: str) -> list[tuple[list[str], list[list[str]]]]:
    """Every (header, rows) of the context: a delimited line of at least two cells followed
    (after at most one blank or rule line) by lines with the same number of cells, split by
    the same delimiter."""
    lines = context.split("\n")
    out = []
    i = 0
    while i < len(lines):
        for delimiter in _DELIMITERS:
            header = _cells(lines[i], delimiter)
            if len(header) < 2 or not all(header):
                continue
            first = i + 1
            if first < len(lines) and not re.sub(r"[-=|+:\s]", "", lines[first]):
                first += 1  # a blank line or a rule under the header
            rows = []
            for line in lines[first:]:
                cells = _cells(line, delimiter)
                if len(cells) != len(header):
                    break
                rows.append(cells)
            if rows:
                out.append((header, rows))
                i = first + len(rows) - 1
                break
        i += 1
    return out


def _table_field(p: Prompt) -> str | None:
    """A cell of the row the question names, in the column the question names (or, when the
    question names a cell's own column, the row's first cell: a reverse look-up; or, when it
    names no column but a number k, the row's k-th cell)."""
    numbers = p.indices
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
                if not named and len(numbers) == 1 and 1 <= numbers[0] <= len(row):
                    return clean(row[numbers[0] - 1])
    return None


def _units(context: str) -> list[str]:
    """Records a labelled field can belong to: blank-line separated blocks, then single lines
    holding two fields or more."""
    blocks = [b.strip() for b in re.split(r"\n[^\S\n]*\n", context) if b.strip()]
    lines = [line for line in context.split("\n") if len(_FIELD.findall(line)) >= 2]
    return blocks + lines


def _labelled_field(p: Prompt) -> str | None:
    """The value of a `label: value` (or `label=value`) field named by the question, in the
    latest record (block or line) that holds a key of the question (outside its labels) or
    whose first line holds the question's only number."""
    numbers = [t for t in p.question_tokens if t.isdigit()]
    found: tuple[int, str] | None = None
    for unit in _units(p.context):
        fields = [(m["label"], m["value"].strip()) for m in _FIELD.finditer(unit)]
        asked = [(lab, value) for lab, value in fields if p.mentions(lab)]
        if not asked:
            continue
        labels = {lab.lower() for lab, _ in fields}
        words = tokens(unit)
        first = tokens(unit.split("\n", 1)[0])
        keyed = (len(numbers) == 1 and numbers[0] in first) or any(
            k in words and k.lower() not in labels for k in p.keys
        )
        if not keyed:
            continue
        for _, value in asked:
            if not any(k in tokens(value) for k in p.keys):
                at = p.context.rfind(unit)
                if found is None or at > found[0]:
                    found = (at, value)
                break
    return None if found is None else clean(found[1])


def lists(context: str) -> list[list[str]]:
    """Every list of at least three items in the context, in order: items joined on one line
    (by `,` `;` `->` `>` `/` `then` `and`: single words; or short phrases after a line's last
    colon) and items on consecutive lines that start with a number or a bullet."""
    out: list[tuple[int, list[str]]] = []
    for m in _LIST.finditer(context):
        out.append((m.start(), _LIST_SEP.split(m.group())))
    at = 0
    run: list[str] = []
    for line in [*context.split("\n"), ""]:
        tail = line.rsplit(": ", 1)[-1].strip().rstrip(".")
        parts = [x.strip() for x in re.split(r"[,;]", tail)]
        if len(parts) >= 3 and all(0 < len(x.split()) <= MAX_ITEM_WORDS for x in parts):
            out.append((at + len(line) - len(tail), parts))
        item = _ENUMERATED.match(line)
        if item:
            run.append(item["item"].rstrip("."))
        else:
            if len(run) >= 3:
                out.append((at, run))
            run = []
        at += len(line) + 1
    return [items for _, items in sorted(out, key=lambda x: x[0])]


def _list_next(p: Prompt) -> str | None:
    """From the item after the one the question names last, in the latest list holding it;
    else from the k-th item when the question has the one number k; else the latest list
    backwards. The rest of the list follows (`b, c, d`): a guess starting with the right item
    is right, and so is one for "the next two" or "the list backwards"."""
    found = lists(p.context)
    if not found:
        return None
    for items in reversed(found):
        spoken = [" " + " ".join(tokens(item)).lower() + " " for item in items[:-1]]
        named = [(p.spoken.rfind(s), k) for k, s in enumerate(spoken) if s.strip()]
        named = [(at, k) for at, k in named if at >= 0 and MASK not in items[k]]
        if named:
            return ", ".join(items[max(named)[1] + 1 :])
    numbers = p.indices
    if len(numbers) == 1 and 1 <= numbers[0] <= len(found[-1]):
        return ", ".join(found[-1][numbers[0] - 1 :])
    return ", ".join(reversed(found[-1]))


TABLE_FIELD = Solver(
    "table_field", "field by position: the column a header names, the row a key names", _table_field
)
LABELLED_FIELD = Solver(
    "labelled_field", "a 'Label: value' field of the record a key or number names", _labelled_field
)
LIST_NEXT = Solver(
    "list_next", "list continuation: the successor, the k-th or last item", _list_next
)
