"""Host-side file access inside a sandbox root that never follows the sandbox's symlinks.

The host reads and writes as root while the sandbox's own code may have planted a symlink such
as `out -> /etc/shadow`, or a FIFO that would block the host forever. So each component is
opened relative to its parent with O_NOFOLLOW (a symlink anywhere on the path is refused
instead of followed outside the root), and only regular files are read or written.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from toolkit.sandbox.base import relative_parts

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO planted where a file is expected must not hang the host on open().
_FILE_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def _must_be_regular(fd: int, path: str) -> None:
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        raise ValueError(f"{path}: not a regular file in the sandbox root")


@contextlib.contextmanager
def _parent_dir(
    root: Path, parts: list[str], create: bool, owner: tuple[int, int] | None
) -> Iterator[int]:
    """An fd of the directory holding the last component, walked without following links."""
    fd = os.open(root, _DIR_FLAGS)
    try:
        for name in parts[:-1]:
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(name, 0o755, dir_fd=fd)
                if owner is not None:
                    os.chown(name, *owner, dir_fd=fd, follow_symlinks=False)
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError as e:
                raise ValueError(f"{'/'.join(parts)}: {name!r} is not a plain directory") from e
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def read_under(root: Path, path: str) -> bytes:
    """Bytes of `path` relative to `root`; FileNotFoundError if absent, ValueError on a link."""
    parts = list(relative_parts(path))
    with _parent_dir(root, parts, create=False, owner=None) as dir_fd:
        try:
            fd = os.open(parts[-1], _FILE_FLAGS | os.O_RDONLY, dir_fd=dir_fd)
        except OSError as e:
            if isinstance(e, FileNotFoundError):
                raise FileNotFoundError(f"{path} does not exist in the sandbox root") from e
            raise ValueError(f"{path}: cannot read it as a plain file ({e.strerror})") from e
        with os.fdopen(fd, "rb") as f:
            _must_be_regular(f.fileno(), path)
            os.set_blocking(f.fileno(), True)
            return f.read()


def write_under(root: Path, path: str, data: bytes, owner: tuple[int, int] | None) -> None:
    """Write `path` relative to `root` (parents created), owned by `owner` when given."""
    parts = list(relative_parts(path))
    with _parent_dir(root, parts, create=True, owner=owner) as dir_fd:
        try:
            fd = os.open(parts[-1], _FILE_FLAGS | os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=dir_fd)
        except OSError as e:
            raise ValueError(f"{path}: cannot write it as a plain file ({e.strerror})") from e
        with os.fdopen(fd, "wb") as f:
            _must_be_regular(f.fileno(), path)
            os.set_blocking(f.fileno(), True)
            f.truncate(0)
            f.write(data)
            if owner is not None:
                os.fchown(f.fileno(), *owner)
