"""Small exams cut from real ones, for tests about a grading's plumbing rather than an exam's
size: the first few questions of each family, in the file's order and its exact lines."""

from __future__ import annotations

import json
from pathlib import Path


def few_per_family(exam: Path, count: int, out: Path) -> Path:
    """Write to `out` the first `count` questions of each family of `exam` (read only) and
    return `out`."""
    taken: dict[str, int] = {}
    lines = []
    for line in exam.read_text(encoding="utf-8").splitlines():
        family = json.loads(line)["family"]
        taken[family] = taken.get(family, 0) + 1
        if taken[family] <= count:
            lines.append(line + "\n")
    out.write_text("".join(lines), encoding="utf-8")
    return out
