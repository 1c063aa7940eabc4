"""The exam file: `exam.jsonl`, one question a line, in canonical JSON.

Canonical JSON here means: keys sorted, UTF-8 (no ASCII escaping), no spaces, one `\\n` after each
line. The exam hash is the SHA-256 of exactly those bytes, so the same questions always give the
same hash. Prompts and answers are text; the grader works on their UTF-8 bytes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

EXAM_FILE = "exam.jsonl"
MANIFEST_FILE = "manifest.json"
SHORT_HASH = 8
"""Hex digits of an exam's published short hash (and the fewest `verify-exam` accepts)."""


class Question(BaseModel):
    """One completion question: the model sees `prompt` and must produce `answer` exactly."""

    model_config = ConfigDict(extra="allow", frozen=True)

    id: str = Field(min_length=1, description="Unique id within the exam, e.g. 'records-007-2'.")
    family: str = Field(min_length=1, description="Exam family that generated it.")
    prompt: str = Field(description="Document text up to the answer span, earlier answers masked.")
    answer: str = Field(min_length=1, description="The exact answer span.")
    tier: int | None = Field(
        default=None,
        ge=1,
        le=3,
        description="Difficulty tier (exam_builder.families.base.TIERS) where the family's "
        "generator marks it (absent: the family's only tier). In the exam file only, never "
        "sent to a bundle.",
    )


class ExamFileError(ValueError):
    """An exam file that cannot be read; the message names the file and line."""


def canonical_line(record: dict[str, object]) -> bytes:
    """One canonical JSON line (sorted keys, UTF-8, no spaces, trailing newline)."""
    text = json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return text.encode("utf-8") + b"\n"


def serialize(questions: Iterable[Question]) -> bytes:
    """The canonical bytes of an exam file."""
    return b"".join(canonical_line(_record(q)) for q in questions)


def _record(question: Question) -> dict[str, object]:
    """A question's fields for its line: `tier` only where the generator marked it (a family of
    one tier keeps the bytes it had before tiers)."""
    record = question.model_dump()
    if record.get("tier") is None:
        record.pop("tier", None)
    return record


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    """SHA-256 of a file's exact bytes (the exam hash, for an exam.jsonl)."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_exam(path: Path) -> list[Question]:
    """Read an exam file (`exam.jsonl`, or a directory holding one)."""
    if path.is_dir():
        path = path / EXAM_FILE
    questions: list[Question] = []
    seen: set[str] = set()
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ExamFileError(f"{path}: cannot read exam: {exc}") from exc
    for n, line in enumerate(lines, 1):
        try:
            q = Question.model_validate(json.loads(line))
        except json.JSONDecodeError as exc:
            raise ExamFileError(f"{path}:{n}: not a valid question: {exc}") from exc
        except ValidationError as exc:  # one line: the first field at fault, and how many
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "the line"
            more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
            msg = f"{path}:{n}: not a valid question: {where}: {first['msg']}{more}"
            raise ExamFileError(msg) from exc
        if q.id in seen:
            raise ExamFileError(f"{path}:{n}: duplicate question id '{q.id}'")
        seen.add(q.id)
        questions.append(q)
    if not questions:
        raise ExamFileError(f"{path}: the exam has no questions")
    return questions
