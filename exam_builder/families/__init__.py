"""The built-in exam families, one module each, in the order an exam lists them."""

from __future__ import annotations

from exam_builder.families import (
    extraction,
    lists,
    numeric,
    passages,
    records,
    schedules,
    symbolic,
    vocabulary,
)
from exam_builder.families.base import AnyFamily, Family, Params, SolveError

BUILTIN: dict[str, AnyFamily] = {
    m.FAMILY.name: m.FAMILY
    for m in (passages, records, vocabulary, schedules, lists, symbolic, numeric, extraction)
}
"""Built-in families by name."""

__all__ = ["BUILTIN", "AnyFamily", "Family", "Params", "SolveError"]
