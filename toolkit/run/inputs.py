"""The fixed inputs of a run: the exam, the public validation set, the training data.

The public validation set and the demo exam are built from the public banks shipped in
`exam_builder/banks/public/` and cached in the state directory (same bank + same builder =>
same bytes, so a cache hit is checked by hash, not trusted). The official exam is never built
here: the operator passes it with `--exam`, and its hash must match the track's.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from exam_builder import BUILDER_VERSION
from exam_builder.build import build_exam
from exam_builder.exam_file import EXAM_FILE, sha256_file
from toolkit.paths import state_dir
from toolkit.text.data import WARN_NOT_TEXT_SHARE, load_prepared, prepare_train_data
from toolkit.tracks.model import Track

PUBLIC_BANKS = Path(__file__).resolve().parent.parent.parent / "exam_builder" / "banks" / "public"
VALIDATION_BANK = PUBLIC_BANKS / "validation"
DEMO_BANK = PUBLIC_BANKS / "demo"


class InputError(ValueError):
    """An exam or data input that does not fit the run; the message says what to do."""


def built_exam(bank: Path, name: str) -> Path:
    """`exam.jsonl` of a public bank, built once into the state dir."""
    out = state_dir() / "exams" / f"{name}-{BUILDER_VERSION}"  # a new engine, a new exam
    exam = out / EXAM_FILE
    if exam.is_file():
        return exam
    with tempfile.TemporaryDirectory(dir=state_dir()) as tmp:
        # The quality report's English baseline is skipped: it changes the manifest, not the
        # exam bytes, and costs time on every fresh machine.
        build_exam(bank, Path(tmp) / "exam", english_text=None, allow_in_repo=True)
        out.parent.mkdir(parents=True, exist_ok=True)
        if not out.exists():
            shutil.move(Path(tmp) / "exam", out)
    return exam


def public_set() -> Path:
    return built_exam(VALIDATION_BANK, "public-validation")


def resolve_exam(track: Track, exam: Path | None) -> Path:
    """The exam file for a run on `track`; its hash must match the track's."""
    if exam is None:
        if not track.demo:
            raise InputError(
                f"track '{track.id}' needs its frozen exam: pass --exam PATH (exam.jsonl, hash "
                f"{track.exam_sha256}...)"
            )
        exam = built_exam(DEMO_BANK, "demo")
    if exam.is_dir():
        exam = exam / EXAM_FILE
    if not exam.is_file():
        raise InputError(f"{exam}: no such exam file; pass the exam.jsonl built for the track")
    digest = sha256_file(exam)
    if not track.matches_exam(digest):
        raise InputError(
            f"{exam}: exam hash {digest[:12]}... does not match track '{track.id}' "
            f"({track.exam_sha256}); pass the track's exam or choose another --track"
        )
    return exam.resolve()


def check_public_set(track: Track, path: Path) -> None:
    digest = sha256_file(path)
    if track.public_set_sha256 and not digest.startswith(track.public_set_sha256):
        raise InputError(
            f"{path}: public validation set hash {digest[:12]}... does not match track "
            f"'{track.id}' ({track.public_set_sha256})"
        )


def prepare_data(source: Path | None, out_dir: Path) -> Path:
    """Prepared training data (train.bin, val.bin, meta.json) in `out_dir`."""
    prepare_train_data(source, out_dir)
    return out_dir


def prepare_inputs(
    track: Track,
    exam: Path | None,
    train_data: Path | None,
    data_dir: Path,
    say: Callable[[str], None],
) -> tuple[Path, Path]:
    """A run's exam and public set (checked against the track), and its training text
    prepared into `data_dir` (its hashes said, and refused when the track pins other data).
    `InputError`, `ExamFileError` or `DataError` say what to do."""
    exam_path = resolve_exam(track, exam)
    public = public_set()
    check_public_set(track, public)
    say("preparing the training data...")
    prepare_data(train_data, data_dir)
    data = load_prepared(data_dir)
    say(
        f"training data: {data.train_bytes:,} bytes (sha256 {data.train_sha256[:12]}...), "
        f"validation {data.val_bytes:,} bytes (sha256 {data.val_sha256[:12]}...)"
    )
    if data.not_text_share > WARN_NOT_TEXT_SHARE:
        say(
            f"[bold yellow]warning:[/bold yellow] {100 * data.not_text_share:.1f}% of the "
            "training bytes are not text (invalid UTF-8 or control characters); recorded "
            "with the run"
        )
    mismatch = track.train_data_mismatch(data.train_sha256, data.val_sha256)
    if mismatch:
        raise InputError(
            f"{train_data or 'the default corpus'}: not the training data of track "
            f"'{track.id}' ({mismatch}); pass the track's training text with --train-data"
        )
    return exam_path, public
