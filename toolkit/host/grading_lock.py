"""One lock per host that keeps an official track's hidden grading alone on its host (#50).

Sandboxes on one host share a kernel, and what stays host-wide between them (a file lock on a
file both can read, free memory, the task count, CPU time: site/docs/security/channels.md)
carries tens of bits a second. A run's agent beside another run's hidden grading could read
that grading's exam through it. So on an official track:

- every run holds the lock *shared* from before its sandboxes exist until they are gone (its
  agent's session): runs of any track work side by side as before;
- a hidden grading holds it *exclusive*: it waits until no other run's session is live on the
  host, and none starts until the grading is over. It takes the lock before the grading
  starts, so the wait is in no published time.

A gate (a second lock file) keeps a waiting grading from being starved by sessions that keep
starting: a session passes the gate before it takes its share, and a grading holds the gate
while it waits. The kernel drops both locks when their holder dies: nothing to clean up.

Where the operator accepted the measured rate (`campaign run --accept-host-channel RATE`, or
`ACCEPT_ENV` set to it), gradings take no exclusive lock: runs of that host go on side by side.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from toolkit.paths import state_dir
from toolkit.sandbox import neighbours

ROOT_DIR = Path("/run/ari-bench")
"""Where the lock lives as root: one for the whole host, whatever each toolkit's state dir."""
DIR_ENV = "ARI_HOST_LOCK_DIR"
"""Moves the lock's folder (tests; an operator whose /run is not shared by its toolkits)."""
ACCEPT_ENV = "ARI_ACCEPT_HOST_CHANNEL"
"""Set to `accepted_rate()` by a campaign whose operator accepted the channel: its runs'
hidden gradings then run beside other runs."""


def accepted_rate() -> str:
    """The words an operator gives to accept the channel: the measured rate, e.g. `50bit/s`."""
    return f"{neighbours.MEASURED_BITS_PER_S:g}bit/s"


def channel_accepted() -> bool:
    """Whether this process runs for an operator who accepted the measured rate."""
    return os.environ.get(ACCEPT_ENV, "").replace(" ", "") == accepted_rate()


def lock_dir() -> Path:
    """The host's lock folder: `DIR_ENV`, else /run/ari-bench as root, else the state dir
    (a user's runs see only each other: they run as that user, not as the sandbox uids)."""
    if os.environ.get(DIR_ENV):
        return Path(os.environ[DIR_ENV])
    return ROOT_DIR if os.geteuid() == 0 else state_dir()


class HostLock:
    """A run's hold on the host: `share` for its session, `exclusive` for its hidden grading,
    `release` at its end (or the holder's death)."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder or lock_dir()
        self._fd: int | None = None
        self.mode = "none"
        """"none", "shared" or "exclusive": what this run holds now."""

    def _open(self, name: str) -> int:
        self.folder.mkdir(mode=0o755, parents=True, exist_ok=True)
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
        return os.open(self.folder / name, flags, 0o600)

    def _through_gate(self, mode: int) -> None:
        gate = self._open("host.gate")
        try:
            fcntl.flock(gate, fcntl.LOCK_EX)
            if self._fd is None:
                self._fd = self._open("host.lock")
            fcntl.flock(self._fd, mode)
        finally:
            os.close(gate)  # the gate goes with its descriptor

    def share(self) -> None:
        """Hold the lock shared: waits only while a hidden grading holds or awaits it."""
        self._through_gate(fcntl.LOCK_SH)
        self.mode = "shared"

    def exclusive(self, waiting: Callable[[str], None] | None = None) -> None:
        """Hold the lock alone: the share (if held) goes first, then it waits for every other
        run's session on this host to end. `waiting` hears once if it must wait."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        self._fd = self._fd if self._fd is not None else self._open("host.lock")
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if waiting is not None:
                waiting(
                    "waiting for the other runs on this host to end: a hidden grading of an "
                    "official track runs alone on its host (security/channels.md)"
                )
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            self._through_gate(fcntl.LOCK_EX)
        self.mode = "exclusive"

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self.mode = "none"


@contextlib.contextmanager
def alone_on_host(official: bool, waiting: Callable[[str], None] | None = None) -> Iterator[str]:
    """For a hidden grading outside a run (`toolkit grade`, `runs verify`): on an official
    track, hold the host's lock alone while it lasts, unless the rate was accepted. Yields
    what was in force: `hidden-grading-alone`, `host-channel-accepted` or `none`."""
    if not official:
        yield "none"
        return
    if channel_accepted():
        yield "host-channel-accepted"
        return
    lock = HostLock()
    lock.exclusive(waiting)
    try:
        yield "hidden-grading-alone"
    finally:
        lock.release()
