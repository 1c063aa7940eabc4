"""What `toolkit grade` is handed, checked before any work: a bundle and an exam, each the
thing it claims to be, in one line each when not (the arguments swapped, a JSON file that is
no exam)."""

from __future__ import annotations

import tarfile
from pathlib import Path

from exam_builder.exam_file import EXAM_FILE, ExamFileError, load_exam

USAGE = "toolkit grade BUNDLE --exam EXAM"


def _is_exam(path: Path) -> bool:
    try:
        load_exam(path)
    except ExamFileError:
        return False
    return True


def grade_inputs_problem(bundle: Path, exam: Path) -> str | None:
    """Why `bundle` or `exam` is not what `toolkit grade` needs, in one line (None: both look
    right). The exam is read whole here, so a bad one is refused before the bundle is packed."""
    swapped = f"the arguments look swapped: {USAGE}"
    # Any other file stays the grader's to judge (a broken archive is a graded failure).
    if bundle.is_file() and not tarfile.is_tarfile(bundle) and _is_exam(bundle):
        return f"{bundle} is an exam, not a bundle: {swapped}"
    exam_file = exam / EXAM_FILE if exam.is_dir() else exam
    if exam.is_dir() and (exam / "inference.py").is_file():
        return f"--exam {exam} is a bundle (it holds inference.py), not an exam: {swapped}"
    if not exam_file.is_file():
        return f"--exam {exam}: no {EXAM_FILE} there (pass --exam with a built exam)"
    try:
        load_exam(exam_file)
    except ExamFileError as exc:
        return f"--exam: {exc} (an exam is the exam.jsonl that build-exam writes)"
    return None
