"""Claims: a run key is run by one campaign process at a time, whatever else runs beside it.

A claim is an exclusive `flock` on `<results>/.campaign/claims/<key>.lock`, held by the driver
while the key is running or waiting for a retry. The kernel drops the lock when the process
dies, however it dies, so a killed campaign leaves no stale claim: starting it again resumes at
once. Two campaigns on the same results folder (two terminals, two `ray job submit`s from one
head node) split the keys between them instead of running any twice. The lock file keeps the
holder's pid and host for people; the lock itself is what counts.
"""

from __future__ import annotations

import fcntl
import os
import socket
from pathlib import Path

from toolkit.campaign.plan import TO_RUN, KeyPlan, RunKey

STATE_DIR = ".campaign"  # inside the results folder; hidden from the site's `*/*.json` glob


def campaign_state(results_dir: Path) -> Path:
    """`<results>/.campaign/` (claims, job files, logs), kept out of git by its own ignore."""
    folder = results_dir / STATE_DIR
    folder.mkdir(parents=True, exist_ok=True)
    ignore = folder / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# campaign state (claims, logs): never published\n*\n")
    return folder


class Claims:
    """The claims this process holds on one results folder."""

    def __init__(self, results_dir: Path) -> None:
        self.folder = campaign_state(results_dir) / "claims"
        self.folder.mkdir(exist_ok=True)
        self._held: dict[RunKey, int] = {}

    def claim(self, key: RunKey) -> bool:
        """Take the key's claim; False when another process (or this one) holds it."""
        if key in self._held:
            return False
        fd = os.open(self.folder / f"{key.slug()}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {socket.gethostname()}\n".encode())
        self._held[key] = fd
        return True

    def descriptor(self, key: RunKey) -> int:
        """The claim's descriptor: a run process that inherits it holds the claim as long as
        it lives, even past the driver (the lock belongs to the open file, not the process)."""
        return self._held[key]

    def release(self, key: RunKey) -> None:
        fd = self._held.pop(key, None)
        if fd is not None:
            os.close(fd)  # closing the descriptor drops the lock

    def release_all(self) -> None:
        for key in list(self._held):
            self.release(key)

    def held(self) -> set[RunKey]:
        return set(self._held)


def holder(results_dir: Path, key: RunKey) -> str | None:
    """Who holds the key's claim now ("PID HOST" as the holder wrote it), or None when nobody
    does. Looks without waiting: the lock is tried and at once let go."""
    path = results_dir / STATE_DIR / "claims" / f"{key.slug()}.lock"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "?"
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def shown_state(results_dir: Path, plan: KeyPlan) -> str:
    """The key's state, or `running` while a campaign holds its claim (in flight, or queued
    for another try)."""
    if plan.state in TO_RUN and holder(results_dir, plan.key) is not None:
        return "running"
    return plan.state


def plan_record(plan: KeyPlan, results_dir: Path) -> dict[str, object]:
    return {
        "track": plan.key.track,
        "model": plan.key.model,
        "effort": plan.key.effort,
        "seed": plan.key.seed,
        "state": shown_state(results_dir, plan),
        "invalid": plan.invalid_count,
        "results": [{"path": str(p), "status": r.status} for p, r in plan.results],
    }
