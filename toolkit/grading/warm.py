"""Whether a grading's workers warm up torch, and numpy, before the bundle loads.

A grading worker imports torch (and starts CUDA on a GPU) before the bundle's code runs, as the
harness's own work: nearly every bundle needs it, and done early it overlaps the packing and
phase 1 instead of eating into `load()`'s limit. It costs about 2 CPU seconds a worker, and a
grading starts two or three workers. A bundle whose Python never names torch (a rule, a lookup
table, a numpy model) gets nothing from it, so its workers start without it. numpy likewise
(about 0.15 CPU seconds a worker, and most gradings of the test suite grade rule bundles): a
bundle that names neither numpy nor torch gets a worker that imports neither.

The decision reads the bundle's own files, which are hostile input; it decides nothing but
this warm-up. Wherever the answer is not certain (an archive that does not read, a file too
large to read whole, a compiled module, more files than the scan reads, a link) it is "warm",
today's behaviour. A bundle that imports torch in a way the scan does not see (a name built at
run time) imports it in its own `load()`, inside its own limit: a slower load, nothing else.
"""

from __future__ import annotations

import os
import re
import stat
import tarfile
import zlib
from pathlib import Path

NAMES = re.compile(rb"\b(numpy|torch)\b")
EVERYTHING = frozenset({"numpy", "torch"})
"""What a scan that cannot be sure answers: warm up both."""
MAX_ENTRIES = 4096
"""Entries (files and folders) a scan looks at before it gives up and warms up."""
MAX_SOURCE_BYTES = 1 << 20
"""A Python file larger than this is not read: the workers warm up."""
OPAQUE = (".so", ".pyd", ".pyc", ".pth", ".egg", ".whl", ".zip")
"""Files whose imports a text scan cannot see: the workers warm up."""


def named(bundle: Path) -> frozenset[str]:
    """Which of numpy and torch the Python files of `bundle` (a folder, or a .tar.gz of one)
    name, read once; both unless every Python file was read."""
    try:
        if bundle.is_dir() and not bundle.is_symlink():
            return _folder_names(bundle)
        return _archive_names(bundle)
    except (OSError, tarfile.TarError, EOFError, zlib.error, ValueError):
        return EVERYTHING


def names_torch(bundle: Path) -> bool:
    """True unless every Python file of `bundle` was read and none names torch."""
    return "torch" in named(bundle)


def names_numpy(bundle: Path) -> bool:
    """True unless every Python file of `bundle` was read and none names numpy or torch
    (torch imports numpy where it is installed)."""
    return bool(named(bundle))


def _found(name: str, read: bytes | None) -> frozenset[str]:
    """What one file names: both where it cannot be read to say, nothing if not Python."""
    if name.endswith(OPAQUE):
        return EVERYTHING
    if not name.endswith(".py"):
        return frozenset()
    if read is None:
        return EVERYTHING
    return frozenset(m.decode() for m in NAMES.findall(read))


def _folder_names(root: Path) -> frozenset[str]:
    found: frozenset[str] = frozenset()
    seen = 0
    for folder, dirs, files in os.walk(root, followlinks=False):
        seen += len(dirs) + len(files)
        if seen > MAX_ENTRIES:
            return EVERYTHING
        for name in files:
            if not name.endswith((".py", *OPAQUE)):
                continue
            path = os.path.join(folder, name)
            info = os.lstat(path)
            regular = stat.S_ISREG(info.st_mode) and info.st_size <= MAX_SOURCE_BYTES
            found |= _found(name, _read(path) if regular else None)
            if found == EVERYTHING:
                return found
    return found


def _read(path: str) -> bytes | None:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(MAX_SOURCE_BYTES + 1)
    finally:
        os.close(fd)
    return data if len(data) <= MAX_SOURCE_BYTES else None


def _archive_names(archive: Path) -> frozenset[str]:
    found: frozenset[str] = frozenset()
    with tarfile.open(archive, mode="r:*") as tar:
        for seen, member in enumerate(tar, start=1):
            if seen > MAX_ENTRIES:
                return EVERYTHING
            name = member.name
            if not name.endswith((".py", *OPAQUE)):
                continue
            read: bytes | None = None
            if member.isfile() and member.size <= MAX_SOURCE_BYTES:
                extracted = tar.extractfile(member)
                read = extracted.read() if extracted is not None else None
            found |= _found(name, read)
            if found == EVERYTHING:
                return found
    return found
