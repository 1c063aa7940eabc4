"""The view's section on a run's public submissions, question by question: for each candidate
whose public scoring kept its rows (`submissions.QUESTIONS_SUFFIX`, the public validation set
only), a table of family, tier, prompt end, answer, what the bundle wrote, pass.

The rows hold the bundle's output (already printable, `questions.printable`); here every cell
is HTML-escaped too, and a file that does not read as rows is named, not shown.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from toolkit.grading.report import QuestionResult
from toolkit.run.artifacts import CANDIDATES_DIR
from toolkit.run.submissions import QUESTIONS_SUFFIX

_ROWS = TypeAdapter(list[QuestionResult])
MAX_FILE_BYTES = 4_000_000
"""Largest rows file read (a public set is about 20 questions: far below)."""


def _table(rows: list[QuestionResult]) -> str:
    head = "".join(
        f"<th>{name}</th>"
        for name in ("question", "family", "tier", "prompt (end)", "expected", "written", "pass")
    )
    body = []
    for r in rows:
        written = r.written if r.written is not None else f"— ({r.problem or 'no output'})"
        cells = [r.id, r.family, "—" if r.tier is None else str(r.tier), r.prompt_tail]
        cells += [r.expected, written, "yes" if r.passed else "no"]
        body.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def questions_section(artifacts: Path) -> str:
    """HTML: every public submission of the run, question by question ('' when none kept)."""
    files = sorted((artifacts / CANDIDATES_DIR).glob(f"*{QUESTIONS_SUFFIX}"))
    if not files:
        return ""
    parts = ["<h2>Public submissions, question by question</h2>"]
    for file in files:
        candidate = html.escape(file.name.removesuffix(QUESTIONS_SUFFIX))
        try:
            if file.stat().st_size > MAX_FILE_BYTES:
                raise ValueError("too large")
            rows = _ROWS.validate_python(json.loads(file.read_text(encoding="utf-8")))
        except (OSError, ValueError, ValidationError):
            parts.append(f"<p>{candidate}: its rows could not be read</p>")
            continue
        passed = sum(r.passed for r in rows)
        parts.append(
            f"<details><summary>{candidate}: {passed}/{len(rows)} on the public validation "
            f"set</summary>{_table(rows)}</details>"
        )
    return "".join(parts)
