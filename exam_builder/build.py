"""Build an exam from a bank: generate, check quality, write `exam.jsonl` + `manifest.json`.

The output rules protect a hidden exam: the build refuses to write inside a git working tree
(unless `allow_in_repo`, for public sets and tests), refuses to overwrite an existing exam, and
writes each file to a temporary name first, then links it into place, so no half-written file
is ever left and a concurrent build cannot clobber another. It also refuses an exam that fails
the quality gates (see `exam_builder.quality`).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from exam_builder import BUILDER_VERSION
from exam_builder.bank import load_bank
from exam_builder.document import MASK
from exam_builder.exam_file import EXAM_FILE, MANIFEST_FILE, serialize, sha256_bytes
from exam_builder.generate import generate_documents, generate_questions
from exam_builder.learnability import LearnReport, learn_problems
from exam_builder.manifest import Manifest
from exam_builder.pool import load_pool, pool_dirs
from exam_builder.quality import quality_problems, quality_report

__all__ = [
    "BuildError",
    "Learned",
    "PreparedExam",
    "build_exam",
    "generate_questions",
    "git_worktree",
    "prepare_exam",
    "with_learnability",
]


class BuildError(ValueError):
    """The exam cannot be built or written; the message says what, where, and what to do."""


def git_worktree(path: Path) -> Path | None:
    """The root of the git working tree holding `path` (which need not exist yet), if any."""
    path = path.resolve()  # normalises "..", which would otherwise visit the wrong parents
    for candidate in (path, *path.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def check_destination(out_dir: Path, *, allow_in_repo: bool) -> None:
    """Refuse a destination inside a git working tree, or one that already holds an exam."""
    root = git_worktree(out_dir)
    if root is not None and not allow_in_repo:
        raise BuildError(
            f"{out_dir}: inside the git working tree {root}; a hidden exam must never be "
            "committed: choose an --out outside it (or pass --allow-in-repo for a public set)"
        )
    for name in (EXAM_FILE, MANIFEST_FILE):
        if (out_dir / name).exists():
            raise BuildError(
                f"{out_dir / name}: already exists; an exam is never overwritten: "
                "choose a new --out directory or delete the old exam first"
            )


def _write_new(path: Path, data: bytes) -> None:
    """Create `path` with `data` atomically; fail if it exists (temp file, fsync, hard link)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.link(tmp, path)  # unlike rename, never replaces an existing file
    except FileExistsError as exc:
        raise BuildError(f"{path}: appeared while building; not overwritten") from exc
    finally:
        Path(tmp).unlink(missing_ok=True)


@dataclass(frozen=True)
class PreparedExam:
    """An exam built in memory: its bytes, its manifest, and why it may not be published."""

    exam_bytes: bytes
    manifest: Manifest
    problems: list[str]


def prepare_exam(
    bank_dir: Path,
    *,
    english_text: bytes | None,
    progress: Callable[[str, int, int], None] | None = None,
    pool: Iterable[Path] = (),
) -> PreparedExam:
    """Load the bank, generate the questions and score them; write nothing.

    `english_text` trains the context-free baseline of the quality report (the toolkit passes
    its default corpus); None skips that column. `progress(stage, done, total)`, if given, is
    called as questions are generated (stage "generate") and scored ("quality"). `pool`:
    folders of private solvers run besides the bank's own `solvers/` (`exam_builder.pool`).
    Raises `BankError` for a bad bank or pool.
    """
    bank = load_bank(bank_dir)
    solvers = load_pool(pool_dirs(bank_dir, pool))
    total = sum(f.count for f in bank.families)
    done = {"generate": 0, "quality": 0}

    def tick(stage: str) -> Callable[[int], None] | None:
        if progress is None:
            return None

        def advance(n: int) -> None:
            done[stage] += n
            progress(stage, done[stage], total)

        return advance

    documents = generate_documents(bank, tick("generate"))
    questions = [q for d in documents for q in d.questions]
    report = quality_report(bank, documents, english_text, tick("quality"), solvers)
    exam_bytes = serialize(questions)
    counts: dict[str, int] = {}
    for q in questions:
        counts[q.family] = counts.get(q.family, 0) + 1
    manifest = Manifest(
        exam_sha256=sha256_bytes(exam_bytes),
        questions=len(questions),
        families=counts,
        builder_version=BUILDER_VERSION,
        bank_id=bank.id,
        bank_sha256=bank.hash,
        mask=MASK,
        quality=report,
    )
    return PreparedExam(exam_bytes, manifest, quality_problems(report))


@dataclass(frozen=True)
class Learned:
    """The learners' tables of one exam: the reference (own-bank) learner's, which the gate
    holds to its floors, and the public-side learner's where it ran (measured, not gated)."""

    own: LearnReport
    public_side: LearnReport | None = None


Learner = Callable[[PreparedExam], LearnReport | Learned]
"""Trains and grades the learners on a prepared exam (the toolkit supplies it)."""


def with_learnability(prepared: PreparedExam, learn: Learner) -> PreparedExam:
    """`prepared` with the learners' tables in its manifest and the learnable side's problems
    (the reference learner's, `exam_builder.learnability`) added to its own."""
    learned = learn(prepared)
    if isinstance(learned, LearnReport):
        learned = Learned(learned)
    report = learned.own
    manifest = prepared.manifest.model_copy(
        update={"learnability": report, "public_learnability": learned.public_side}
    )
    public = prepared.manifest.quality.public_bank
    return PreparedExam(
        prepared.exam_bytes,
        manifest,
        prepared.problems + learn_problems(report, public_bank=public),
    )


def build_exam(
    bank_dir: Path,
    out_dir: Path,
    *,
    english_text: bytes | None,
    allow_in_repo: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
    pool: Iterable[Path] = (),
    learn: Learner | None = None,
) -> Manifest:
    """Build the exam of `bank_dir` into `out_dir` and return its manifest.

    See `prepare_exam` for `english_text`, `progress` and `pool`. `learn`: the reference learner,
    run once the model-free gate has passed (its table goes into the manifest, and for a bank
    that is not public its floors gate the exam too). Raises `BankError` for a bad bank and
    `BuildError` for a refused destination or a failed gate.
    """
    check_destination(out_dir, allow_in_repo=allow_in_repo)
    prepared = prepare_exam(bank_dir, english_text=english_text, progress=progress, pool=pool)
    if prepared.problems:
        raise BuildError(f"{bank_dir}: exam refused: " + "; ".join(prepared.problems))
    if learn is not None:
        prepared = with_learnability(prepared, learn)
        if prepared.problems:
            raise BuildError(f"{bank_dir}: exam refused: " + "; ".join(prepared.problems))
    out_dir.mkdir(parents=True, exist_ok=True)
    _write_new(out_dir / EXAM_FILE, prepared.exam_bytes)
    try:
        _write_new(out_dir / MANIFEST_FILE, prepared.manifest.to_json().encode("utf-8"))
    except BaseException:
        (out_dir / EXAM_FILE).unlink(missing_ok=True)  # no exam without its manifest
        raise
    return prepared.manifest
