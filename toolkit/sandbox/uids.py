"""A uid of its own for each local sandbox, claimed host-wide (issue #50).

The kernel keeps some counters per user, host-wide: the inotify instances and watches a uid
holds, its processes (RLIMIT_NPROC), its POSIX message queue bytes, its pending signals. Two
sandboxes that run as the same uid (`nobody`, before) share them, and one that fills a counter
in chosen time slots signals the other, who tries to take some: 50 bits a second between two
concurrent gradings. So each local sandbox runs as a uid of its own, taken from `UID_RANGE`.

A uid is claimed by an exclusive `flock` on a file named after it in `CLAIM_DIR` (a host path
every toolkit on the host shares, whatever its state directory): the kernel drops the lock when
its holder closes the file or dies, so a claim never outlives its process and never needs
cleaning up. Within one process, sandboxes on the same root (a run's controller and runner
share its workspace) share one claim: they must be able to write each other's files.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from dataclasses import dataclass
from pathlib import Path

UID_RANGE = (1_900_000_000, 65_536)
"""(first uid, how many): far above any uid a distribution gives its users (systemd's dynamic
users end at 65519, the subordinate ranges of /etc/subuid start at 100000 and are usually well
below this), and below 2**31, which some tools take for a signed number."""
CLAIM_DIR = Path("/run/ari-bench/sandbox-uids")
"""Where the claims live (root only: only a root host switches uids). /run is a tmpfs on a
systemd host: a reboot starts with no files, and a stale file is no claim anyway."""
ENV_RANGE = "ARI_SANDBOX_UIDS"
"""Overrides `UID_RANGE` as `FIRST-LAST` (inclusive), for a host whose uids already use it."""


class UidsExhausted(RuntimeError):
    """Every uid of the range is claimed."""


@dataclass
class _Claim:
    uid: int
    fd: int
    users: int


_lock = threading.Lock()
_by_root: dict[Path, _Claim] = {}


def uid_range() -> range:
    """The uids to claim from: `UID_RANGE`, or `ENV_RANGE` where set."""
    text = os.environ.get(ENV_RANGE, "").strip()
    if text:
        first, _, last = text.partition("-")
        try:
            low, high = int(first), int(last)
        except ValueError:
            raise ValueError(
                f"{ENV_RANGE}={text!r}: expected FIRST-LAST, e.g. 1900000000-1900065535"
            ) from None
        if not 0 < low <= high < 2**31:
            raise ValueError(f"{ENV_RANGE}={text!r}: expected 0 < FIRST <= LAST < 2**31")
        return range(low, high + 1)
    start, count = UID_RANGE
    return range(start, start + count)


def _try(uid: int, folder: Path) -> int | None:
    """An fd holding the claim of `uid`, or None if another holds it."""
    fd = os.open(folder / str(uid), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def claim(root: Path, folder: Path | None = None) -> int:
    """A uid for a sandbox on `root`: the one other sandboxes of this process on the same root
    hold, else one no process on the host holds (claimed until `release`). Starts at a place
    that depends on the process, so concurrent toolkits rarely try the same uids first."""
    folder = folder or CLAIM_DIR
    with _lock:
        held = _by_root.get(root)
        if held is not None:
            held.users += 1
            return held.uid
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        uids = uid_range()
        ours = {c.uid for c in _by_root.values()}
        start = os.getpid() * 7919 % len(uids)
        for index in range(len(uids)):
            uid = uids[(start + index) % len(uids)]
            if uid in ours:
                continue
            fd = _try(uid, folder)
            if fd is not None:
                _by_root[root] = _Claim(uid, fd, 1)
                return uid
    raise UidsExhausted(
        f"every sandbox uid of {uids.start}-{uids.stop - 1} is claimed (in {folder}); "
        f"end some sandboxes, or give a wider range in {ENV_RANGE}"
    )


class UidClaim:
    """One sandbox's share of the claim on its root's uid; `release` once (more: no-op)."""

    def __init__(self, root: Path, folder: Path | None = None) -> None:
        self.root = root
        self.uid = claim(root, folder)
        self._held = True

    def release(self) -> None:
        if self._held:
            self._held = False
            release(self.root)


def release(root: Path) -> None:
    """One sandbox on `root` is done; the last one gives the uid back."""
    with _lock:
        held = _by_root.get(root)
        if held is None:
            return
        held.users -= 1
        if held.users == 0:
            del _by_root[root]
            with contextlib.suppress(OSError):
                os.close(held.fd)
