"""A small real file system for storage attacks: a tmpfs of a few MiB (the host is root).

Tests that fill a disk use this rather than the host's: a full tmpfs says ENOSPC, and writes
that straddle the last free page come back short, as on any full volume.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from toolkit.sandbox import capped

SMALL_FS_BYTES = 8 * 2**20  # the smallest capped folder


@contextmanager
def small_fs(folder: Path, size: int = SMALL_FS_BYTES) -> Iterator[Path]:
    """`folder` on a tmpfs of `size` bytes while the block runs (skipped where it cannot be)."""
    reason = capped.unavailable("tmpfs")
    if reason is not None:
        pytest.skip(f"this host cannot mount a small tmpfs: {reason}")
    mounted = capped.cap_folder(folder, size, kind="tmpfs")
    if mounted is None:
        pytest.skip("this host cannot mount a small tmpfs")
    try:
        yield folder
    finally:
        mounted.release()


def fill(folder: Path, name: str = "filler.bin") -> int:
    """Write zeros into `folder/name` until the file system is full; return bytes written."""
    written = 0
    fd = os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        block = b"\0" * 65536
        while True:
            try:
                n = os.write(fd, block)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
                block = block[: len(block) // 2]
                if not block:
                    return written
                continue
            written += n
    finally:
        os.close(fd)
