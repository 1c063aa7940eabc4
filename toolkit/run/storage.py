"""The results volume: a run cannot turn what it stores against the harness.

What a run stores lands on the results volume (its candidates, up to 16 MB each; its audit log;
its console): a run that fills the volume used to cut the harness's own writes short, so that
the result could not be written and the run ended `invalid`, a free rerun. Three things stop it:

- caps: the track's `max_candidates` and `max_candidate_bytes` (`runner submit` refuses past
  them), the audit log's own bounds (`toolkit.runner.audit`), the console's (`transcript`);
- a reserve: before the clock starts the harness takes `RESERVE_BYTES` of the volume for itself
  (a file of real blocks, `posix_fallocate`; a volume without that much room refuses the run),
  holds it while the run lasts, and releases it when the session is over, so that the last
  log lines and the result are always written;
- blame: a write the full volume refused (`note_full`) is the run's failure (`failed`, scores
  0) when the run's own files fill the room it was given (`RUN_SHARE` of what was free after
  the reserve at the start); a volume filled by anything else is the harness's (`invalid`,
  with the check as evidence).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from toolkit.run.workspace import WorkspaceError

RESERVE_SUFFIX = ".reserve"
RESERVE_BYTES = 64 * 2**20
"""What the harness keeps for itself: the result file, the last lines of its logs, the
transcript's rewrite and the egress log come out of it (the transcript is capped at 16 MiB)."""
RUN_SHARE = 0.9
"""A full volume is the run's doing when its files take at least this share of the room it
had at the start (the rest: file system bookkeeping, other small writers)."""


class StorageError(WorkspaceError):
    """The results volume cannot hold the harness's reserve: the run does not start."""


def reserve_path(run_folder: Path) -> Path:
    """Where a run's reserve is: `results/<track>/.<run_id>.reserve`."""
    return run_folder.parent / f".{run_folder.name}{RESERVE_SUFFIX}"


def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def used_bytes(folder: Path) -> int:
    """Bytes the files under `folder` take on disk (links not followed)."""
    total = 0
    for root, _, names in os.walk(folder, followlinks=False):
        for name in names:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                continue
    return total


@dataclass
class Volume:
    """The results volume of one run: its reserve, and the writes it refused."""

    folder: Path  # the run folder, results/<track>/<run_id>/
    reserve_bytes: int = RESERVE_BYTES
    room_at_start: int = 0  # free bytes once the reserve was taken
    refused: int = 0  # writes the full volume refused
    first_refusal: str | None = None
    _reserve: Path | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def take_reserve(self) -> None:
        """Allocate the reserve (`reserve_path`: on the results volume, beside the run folder,
        out of every sandbox's sight with the rest of the results) before the clock starts;
        `StorageError` if the volume cannot hold it."""
        path = reserve_path(self.folder)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.posix_fallocate(fd, 0, self.reserve_bytes)
        except OSError as exc:
            os.close(fd)
            path.unlink(missing_ok=True)
            free = free_bytes(path.parent)
            raise StorageError(
                f"{path.parent}: the results volume has {free:,} bytes free, less than the "
                f"{self.reserve_bytes:,} the harness keeps for the result and its logs "
                f"({exc.strerror}): free some space on it, or pass another --results"
            ) from None
        os.close(fd)
        self._reserve = path
        self.room_at_start = free_bytes(path.parent)

    def release_reserve(self) -> None:
        """Give the reserve back (the session is over: what remains to write is the harness's)."""
        if self._reserve is not None:
            self._reserve.unlink(missing_ok=True)
            self._reserve = None

    def note_full(self, what: str) -> None:
        """A write the full volume refused (`what`: which)."""
        with self._lock:
            self.refused += 1
            self.first_refusal = self.first_refusal or what

    def blame(self) -> tuple[str, str] | None:
        """None if no write was refused; else ("run", reason) when the run's own files fill
        the room it had, or ("harness", reason) when something else filled the volume."""
        with self._lock:
            if not self.refused:
                return None
            refused, first = self.refused, self.first_refusal
        stored = used_bytes(self.folder)
        said = (
            f"the results volume filled up: {refused} writes refused (first: {first}); the "
            f"run had stored {stored:,} bytes of the {self.room_at_start:,} free when it started"
        )
        if stored >= RUN_SHARE * self.room_at_start:
            return "run", said + ": the run filled it (scores 0)"
        return "harness", said + ": something else filled it"
