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

TORCH = re.compile(rb"\btorch\b")
NUMPY_OR_TORCH = re.compile(rb"\b(numpy|torch)\b")
"""torch imports numpy where it is installed: a bundle that names torch needs numpy too."""
MAX_ENTRIES = 4096
"""Entries (files and folders) a scan looks at before it gives up and warms up."""
MAX_SOURCE_BYTES = 1 << 20
"""A Python file larger than this is not read: the workers warm up."""
OPAQUE = (".so", ".pyd", ".pyc", ".pth", ".egg", ".whl", ".zip")
"""Files whose imports a text scan cannot see: the workers warm up."""


def names_torch(bundle: Path) -> bool:
    """True unless every Python file of `bundle` (a folder, or a .tar.gz of one) was read and
    none names torch."""
    return _names(bundle, TORCH)


def names_numpy(bundle: Path) -> bool:
    """True unless every Python file of `bundle` was read and none names numpy or torch."""
    return _names(bundle, NUMPY_OR_TORCH)


def _names(bundle: Path, pattern: re.Pattern[bytes]) -> bool:
    try:
        if bundle.is_dir() and not bundle.is_symlink():
            return _folder_names(bundle, pattern)
        return _archive_names(bundle, pattern)
    except (OSError, tarfile.TarError, EOFError, zlib.error, ValueError):
        return True


def _verdict(name: str, read: bytes | None, pattern: re.Pattern[bytes]) -> bool | None:
    """True: the file names `pattern`, or cannot be read to say; None: it says nothing."""
    if name.endswith(OPAQUE):
        return True
    if not name.endswith(".py"):
        return None
    return True if read is None or pattern.search(read) else None


def _folder_names(root: Path, pattern: re.Pattern[bytes]) -> bool:
    seen = 0
    for folder, dirs, files in os.walk(root, followlinks=False):
        seen += len(dirs) + len(files)
        if seen > MAX_ENTRIES:
            return True
        for name in files:
            if not name.endswith((".py", *OPAQUE)):
                continue
            path = os.path.join(folder, name)
            info = os.lstat(path)
            regular = stat.S_ISREG(info.st_mode) and info.st_size <= MAX_SOURCE_BYTES
            if _verdict(name, _read(path) if regular else None, pattern):
                return True
    return False


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


def _archive_names(archive: Path, pattern: re.Pattern[bytes]) -> bool:
    with tarfile.open(archive, mode="r:*") as tar:
        for seen, member in enumerate(tar, start=1):
            if seen > MAX_ENTRIES:
                return True
            name = member.name
            if not name.endswith((".py", *OPAQUE)):
                continue
            read: bytes | None = None
            if member.isfile() and member.size <= MAX_SOURCE_BYTES:
                extracted = tar.extractfile(member)
                read = extracted.read() if extracted is not None else None
            if _verdict(name, read, pattern):
                return True
    return False
