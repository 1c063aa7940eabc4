"""A run folder against the hashes its signed result carries: one check for every reader.

A result's signature covers `RunResult.files` (the SHA-256 of every file of its run folder),
so a line appended to a transcript after signing leaves the signature whole and the file's
hash wrong. `toolkit runs validate` refused such a run and the site counted it; both now ask
`run_folder_check`, so they cannot disagree. Files are opened as every published file is
(`toolkit.results.published`: no link followed, no FIFO or device read, one name only) and
hashed in blocks, never read whole; a file larger than `HASH_LIMIT` is a problem by its size,
unread.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from toolkit.results.model import RunResult
from toolkit.results.published import UnsafePathError, open_published

CANDIDATES_DIR = "candidates"  # the run folder's candidate archives (may be kept out of git)
HASH_LIMIT = 1024 * 1024 * 1024
"""The largest file of a run folder that is hashed (a run stores far less)."""


def _walk(folder: Path) -> tuple[list[Path], list[Path]]:
    """(regular files, anything else) under `folder`, links never followed."""
    files: list[Path] = []
    odd: list[Path] = []
    for root, dirs, names in os.walk(folder, followlinks=False):
        base = Path(root)
        for name in dirs:
            if (base / name).is_symlink():
                odd.append(base / name)
        for name in names:
            path = base / name
            mode = path.lstat().st_mode
            (files if stat.S_ISREG(mode) else odd).append(path)
    return sorted(files), sorted(odd)


def published_sha256(root: Path, rel: str, limit: int = HASH_LIMIT) -> str:
    """SHA-256 of `root/rel`, opened as a published file; `UnsafePathError` for one that is
    not a plain file of its own or is larger than `limit`."""
    fd = open_published(root, rel)
    with os.fdopen(fd, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > limit:
            raise UnsafePathError(f"{root / rel}: {size:,} bytes, more than {limit:,}: unread")
        digest = hashlib.sha256()
        left = limit + 1
        while left > 0 and (block := f.read(min(1 << 20, left))):
            digest.update(block)
            left -= len(block)
        if left <= 0:
            raise UnsafePathError(f"{root / rel}: more than {limit:,} bytes: unread")
    return digest.hexdigest()


def run_folder_check(result_file: Path, result: RunResult) -> tuple[list[str], list[str]]:
    """(problems, notes) of the run folder of `result_file` against the hashes its result
    carries: a file changed, missing, added, or not a plain file is a problem; a candidate
    archive that is absent (kept out of git) is a note. A result without hashes (written
    before they were recorded) gives one note."""
    if result.files is None:
        return [], ["its artifacts are not bound (written before results hashed them)"]
    track_dir = Path(os.path.abspath(result_file)).parent
    root, track = track_dir.parent, track_dir.name
    folder = track_dir / result.run_id
    problems: list[str] = []
    absent: list[str] = []
    files, odd = _walk(folder) if folder.is_dir() else ([], [])
    here = {f"{result.run_id}/{p.relative_to(folder).as_posix()}": p for p in files}
    for path in odd:
        problems.append(f"{path}: not a plain file (a link or a device): not published by a run")
    archives = {
        f"{result.run_id}/{CANDIDATES_DIR}/{c.id}.tar.gz": c.sha256 for c in result.candidates
    }
    for rel, sha in sorted(result.files.items()):
        if rel not in here:
            if rel.startswith(f"{result.run_id}/{CANDIDATES_DIR}/"):
                absent.append(rel)
            else:
                problems.append(f"{result_file.parent / rel}: missing (the result hashed it)")
            continue
        path = here.pop(rel)
        try:
            got = published_sha256(root, f"{track}/{rel}")
        except UnsafePathError as exc:
            problems.append(str(exc))
            continue
        if got != sha:
            problems.append(
                f"{path}: sha256 {got[:12]}, the signed result says {sha[:12]}: changed after "
                "the run"
            )
    for path in sorted(here.values()):
        problems.append(f"{path}: not in the signed result: added after the run")
    for rel, sha in sorted(archives.items()):
        if rel in result.files and result.files[rel] != sha:
            problems.append(
                f"{rel}: the result hashes it {result.files[rel][:12]}, its "
                f"candidate says {sha[:12]}"
            )
    notes = (
        [f"{len(absent)} files of {CANDIDATES_DIR}/ not here (kept out of git)"] if absent else []
    )
    return problems, notes
