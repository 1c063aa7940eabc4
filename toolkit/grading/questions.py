"""A public exam, question by question: what the bundle wrote for each question, beside the
answer (`toolkit grade --questions`, and `toolkit view` for a run's public submissions).

Only for an exam whose own manifest marks it public (built from a bank with `public = true`,
the manifest's hash that of the exam file): a hidden exam is refused before any work, whatever
the caller says, and a hidden grading never keeps the outputs in the first place (`grade.py`
fills `written` only when it is not hidden). What is shown is printable text: control
characters (a terminal's escape sequences, newlines, bidirectional marks) are written as
escapes, so the bundle's output can be shown but never acts on the reader's screen.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from exam_builder.exam_file import EXAM_FILE, MANIFEST_FILE, Question, load_exam, sha256_file
from exam_builder.manifest import ManifestError, load_manifest
from toolkit.grading.grade import grade_bundle
from toolkit.grading.report import GradeReport, QuestionResult

PROMPT_TAIL = 40
"""Characters of a prompt's end shown beside its answer."""
SHOWN_MAX = 60
"""Most characters of an answer or an output shown."""
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}


class QuestionsRefused(ValueError):
    """Question by question was asked of an exam that is not marked public (one line)."""


def public_marking_problem(exam: Path) -> str | None:
    """Why `exam` may not be shown question by question (None: its manifest marks it public).
    The marking is the exam's own: its manifest, describing this very file."""
    exam_file = exam / EXAM_FILE if exam.is_dir() else exam
    manifest_file = exam_file.parent / MANIFEST_FILE
    refused = "question by question is only for an exam its manifest marks public"
    if not manifest_file.is_file():
        return f"{exam_file}: no {MANIFEST_FILE} beside it: {refused}"
    try:
        manifest = load_manifest(manifest_file)
    except ManifestError as exc:
        return f"{exc}: {refused}"
    if manifest.exam_sha256 != sha256_file(exam_file):
        return f"{manifest_file} describes another exam file: {refused}"
    if not manifest.quality.public_bank:
        return f"{exam_file} is a hidden exam (bank '{manifest.bank_id}' is not public): {refused}"
    return None


def printable(text: str, limit: int, *, tail: bool = False) -> str:
    """`text` with every control or format character as an escape, cut to `limit` characters
    (its end when `tail`) with an ellipsis where cut."""
    out = []
    for ch in text:
        if ch in _NAMED:
            out.append(_NAMED[ch])
        elif unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"):
            out.append(f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    shown = "".join(out)
    if len(shown) <= limit:
        return shown
    return "…" + shown[-limit:] if tail else shown[:limit] + "…"


def question_rows(
    questions: list[Question], written: dict[str, bytes], report: GradeReport
) -> list[QuestionResult]:
    """One row per question, in exam order, from phase 1's outputs and the report."""
    passed = set(report.passed_ids)
    problems = {p.partition(": ")[0]: p.partition(": ")[2] for p in report.problems}
    rows = []
    for q in questions:
        got = written.get(q.id)
        answer = q.answer.encode()
        shown = None
        if got is not None and q.id not in problems:
            shown = printable(got[: len(answer)].decode("utf-8", "backslashreplace"), SHOWN_MAX)
        rows.append(
            QuestionResult(
                id=q.id,
                family=q.family,
                tier=q.tier,
                prompt_tail=printable(q.prompt, PROMPT_TAIL, tail=True),
                expected=printable(q.answer, SHOWN_MAX),
                written=shown,
                passed=q.id in passed,
                problem=printable(problems[q.id], SHOWN_MAX) if q.id in problems else None,
            )
        )
    return rows


def grade_questions(bundle: Path, exam: Path, **options: Any) -> GradeReport:
    """`grade_bundle` on a public exam, its report carrying every question's row. Raises
    `QuestionsRefused` before any work when the exam is not marked public."""
    problem = public_marking_problem(exam)
    if problem is not None:
        raise QuestionsRefused(problem)
    written: dict[str, bytes] = {}
    options["hidden"] = False  # public by its own marking: the bundle's words may be shown
    report = grade_bundle(bundle, exam, _written=written, **options)
    report.questions = question_rows(load_exam(exam), written, report)
    return report


def questions_table(rows: list[QuestionResult]) -> Table:
    """The rows as a rich table; every cell plain text (never markup)."""
    table = Table(title="Question by question", title_justify="left", header_style="bold")
    for name in ("question", "family", "tier", "prompt (end)", "expected", "written", "pass"):
        table.add_column(name, overflow="fold")
    for r in rows:
        written = r.written if r.written is not None else f"— ({r.problem or 'no output'})"
        tier = "—" if r.tier is None else str(r.tier)
        cells = [r.id, r.family, tier, r.prompt_tail, r.expected, written]
        table.add_row(*(Text(cell) for cell in cells), "yes" if r.passed else "no")
    return table
