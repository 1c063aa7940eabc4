"""The agent's workspace: exactly what the task brief promises, and nothing it must not see.

Layout (what `TASK.md` describes): `TASK.md`, `starter/` (the starter pipeline), `data/`
(train.bin, val.bin, meta.json; read-only), `public_val/exam.jsonl` (the public validation set),
`bundles/` (empty, for the agent's bundles). The harness's own channel folder, `.runner/`, sits
beside them; the runner sandbox hides it.

Never in it: the exam, the bank, a credential. `find_leaks` checks that before the agent starts
(a training text that quotes the exam would be contamination, not a workspace bug).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from exam_builder.exam_file import load_exam, sha256_file

STARTER_DIR = Path(__file__).resolve().parent.parent / "starter"
TASK_FILE = "TASK.md"
DATA_DIR = "data"
PUBLIC_DIR = "public_val"
BUNDLES_DIR = "bundles"
CHANNEL_DIR = ".runner"
_DATA_FILES = ("train.bin", "val.bin", "meta.json")
_SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", TASK_FILE)


class WorkspaceError(RuntimeError):
    """The workspace could not be assembled, or would leak something; names what and where."""


@dataclass(frozen=True)
class Workspace:
    root: Path
    task_brief_sha256: str
    public_set_sha256: str

    @property
    def data(self) -> Path:
        return self.root / DATA_DIR

    @property
    def channel(self) -> Path:
        return self.root / CHANNEL_DIR


def assemble(
    root: Path, *, data_dir: Path, public_set: Path, starter: Path = STARTER_DIR
) -> Workspace:
    """Build a fresh workspace at `root` (which must not exist yet, or be empty)."""
    brief = starter / TASK_FILE
    if not brief.is_file():
        raise WorkspaceError(f"{brief}: the task brief is missing from the starter folder")
    missing = [n for n in _DATA_FILES if not (data_dir / n).is_file()]
    if missing:
        raise WorkspaceError(f"{data_dir}: prepared training data lacks {', '.join(missing)}")
    root.mkdir(parents=True, exist_ok=True)  # it may be an empty capped folder already
    if any(root.iterdir()):
        raise WorkspaceError(f"{root}: a new workspace goes into an empty folder")
    shutil.copy2(brief, root / TASK_FILE)
    shutil.copytree(starter, root / "starter", ignore=_SKIP)
    (root / DATA_DIR).mkdir()
    for name in _DATA_FILES:
        shutil.copy2(data_dir / name, root / DATA_DIR / name)
        (root / DATA_DIR / name).chmod(0o444)
    (root / PUBLIC_DIR).mkdir()
    shutil.copy2(public_set, root / PUBLIC_DIR / "exam.jsonl")
    (root / BUNDLES_DIR).mkdir()
    return Workspace(
        root=root,
        task_brief_sha256=sha256_file(root / TASK_FILE),
        public_set_sha256=sha256_file(root / PUBLIC_DIR / "exam.jsonl"),
    )


def exam_needles(exam: Path, count: int = 8) -> list[bytes]:
    """Byte strings that only a copy of the exam would contain: each question's answer with the
    text just before it (short answers alone could occur anywhere)."""
    questions = load_exam(exam)
    step = max(1, len(questions) // count)
    return [(q.prompt[-48:] + q.answer).encode() for q in questions[::step][:count]]


def find_leaks(root: Path, *, exam: Path, secrets: list[str]) -> list[str]:
    """Files under `root` that hold the exam (whole or quoted) or a secret value; [] if none."""
    exam_hash = sha256_file(exam)
    needles = [*exam_needles(exam), *(s.encode() for s in secrets if len(s) >= 8)]
    overlap = max((len(n) for n in needles), default=1)
    leaks: list[str] = []
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = Path(dirpath) / name
            if path.is_symlink() or not path.is_file():
                continue
            digest = hashlib.sha256()
            tail = b""
            hit = False
            with path.open("rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
                    window = tail + block
                    hit = hit or any(n in window for n in needles)
                    tail = window[-overlap:]
            if hit or digest.hexdigest() == exam_hash:
                leaks.append(str(path.relative_to(root)))
    return sorted(leaks)
