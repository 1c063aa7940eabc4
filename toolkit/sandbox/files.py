"""Host-side file access inside a sandbox root that never follows the sandbox's symlinks.

The host reads and writes as root while the sandbox's own code may have planted a symlink such
as `out -> /etc/shadow`. So each component is opened relative to its parent with O_NOFOLLOW:
a symlink anywhere on the path is refused instead of followed outside the root.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from toolkit.sandbox.base import relative_parts

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


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
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        except OSError as e:
            if isinstance(e, FileNotFoundError):
                raise FileNotFoundError(f"{path} does not exist in the sandbox root") from e
            raise ValueError(f"{path}: cannot read it as a plain file ({e.strerror})") from e
        with os.fdopen(fd, "rb") as f:
            return f.read()


def write_under(root: Path, path: str, data: bytes, owner: tuple[int, int] | None) -> None:
    """Write `path` relative to `root` (parents created), owned by `owner` when given."""
    parts = list(relative_parts(path))
    with _parent_dir(root, parts, create=True, owner=owner) as dir_fd:
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(parts[-1], flags, 0o644, dir_fd=dir_fd)
        except OSError as e:
            raise ValueError(f"{path}: cannot write it as a plain file ({e.strerror})") from e
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if owner is not None:
                os.fchown(f.fileno(), *owner)
