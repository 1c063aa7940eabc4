"""Read what a results folder publishes without ever reading outside it.

A results folder may come from someone else, so everything in it is hostile input: a link on a
run's path (`results/<track>` or `results/<track>/<run_id>` pointing at `$ARI_HOME/keys`, say)
would otherwise have the site publish whatever it points to. So every reader of a published
file (the loader, `runs validate` and `runs verify`, the site's plan and its copy of the
artifacts) opens it here:

- each part of its path, from the results root down, is opened relative to the one above it
  with `O_NOFOLLOW`: a symlink anywhere on the way (track folder, run folder, a folder inside
  it, the file itself) is refused and named, never followed;
- `..`, absolute paths and empty parts are refused, so what is opened lies under the root;
- the file must be a regular file (a FIFO would hang the reader: it is opened non-blocking)
  with one name only: a hard link shares its bytes with a file that may lie outside the folder
  (the signing key, the operator's log), and nothing here can tell where its other name is;
- a file is read up to a size cap (`read_published`'s `limit`; `READ_LIMIT` by default): a
  larger one is refused by its size before a byte is read, and never more than the cap is
  read whatever the size said (a sparse file of gigabytes costs nothing);
- a path with a NUL or another control character is refused as a path, not passed on to
  the system (which raises on a NUL).

The root itself is the publisher's choice (`--results`, `ARI_RESULTS_DIR`): a link there is
theirs and is followed. What this does not cover: a bind mount inside the folder (only root can
make one) looks like a plain folder.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
WHAT_TO_DO = "nothing outside the results folder is published: put the file itself there"
READ_LIMIT = 16 * 1024 * 1024
"""The most bytes `read_published` reads of one file unless told otherwise: far above any
result file or registry the toolkit writes (a result file is a few kilobytes)."""


class UnsafePathError(ValueError):
    """A published path that leaves the results folder (a link, `..`), or a file that is not
    one plain file of its own; the message is one line naming the path and what is wrong."""


class NotPublishedError(UnsafePathError, FileNotFoundError):
    """A published path with nothing there."""


class TooLargeError(UnsafePathError):
    """A published file larger than its reader's size cap."""


def one_line(text: str) -> str:
    """`text` with every character that is not printable (a newline, a terminal escape in a
    file name someone else chose) written as a Python escape: a refusal stays one line."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def parts_of(rel: str | PurePosixPath) -> list[str]:
    """The parts of a path relative to the results root; `UnsafePathError` for one that could
    lead out of it (absolute, `..`, empty)."""
    text = str(rel)
    parts = text.split("/")
    if text.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise UnsafePathError(f"'{one_line(text)}': not a plain path inside the results folder")
    if any(not c.isprintable() for c in text):
        raise UnsafePathError(f"'{one_line(text)}': a control character in a path, refused")
    return parts


def relative_to_root(root: Path, path: Path) -> str:
    """`path` relative to `root`, as written (no link resolved); `UnsafePathError` when it is
    not below `root`."""
    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    if rel == "." or rel.startswith(".." + os.sep) or rel == "..":
        raise UnsafePathError(f"{path}: outside the results folder {root}")
    return PurePosixPath(*Path(rel).parts).as_posix()


def _refusal(root: Path, parts: list[str], dir_fd: int, why: OSError) -> UnsafePathError:
    """The one-line error for a part that would not open without following a link."""
    shown = root.joinpath(*parts)
    try:
        mode = os.stat(parts[-1], dir_fd=dir_fd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return NotPublishedError(f"{shown}: no such file or folder")
    except OSError:
        mode = 0
    if stat.S_ISLNK(mode):
        return UnsafePathError(f"{shown}: a symlink, refused ({WHAT_TO_DO})")
    return UnsafePathError(f"{shown}: cannot be opened as a plain file or folder ({why.strerror})")


@contextlib.contextmanager
def _folder(root: Path, parts: list[str]) -> Iterator[int]:
    """A descriptor of `root/parts...`, a folder, each part opened without following links."""
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise NotPublishedError(f"{root}: no such folder") from None
    try:
        for i, name in enumerate(parts):
            try:
                child = os.open(name, _DIR, dir_fd=fd)
            except OSError as exc:
                raise _refusal(root, parts[: i + 1], fd, exc) from None
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def check_file(fd: int, shown: Path) -> os.stat_result:
    """`fstat` of an open published file; `UnsafePathError` unless it is a regular file with
    a single name."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise UnsafePathError(f"{shown}: not a plain file, refused")
    if st.st_nlink != 1:
        raise UnsafePathError(
            f"{shown}: a hard link ({st.st_nlink} names; one may lie outside the results "
            f"folder), refused ({WHAT_TO_DO}, as a copy of its own)"
        )
    return st


def open_published(root: Path, rel: str | PurePosixPath) -> int:
    """A read-only descriptor of `root/rel`, opened as described above (the caller closes it).
    Raises `UnsafePathError` naming the part that is refused (`NotPublishedError` if absent)."""
    parts = parts_of(rel)
    with _folder(root, parts[:-1]) as dir_fd:
        try:
            fd = os.open(parts[-1], _FILE, dir_fd=dir_fd)
        except OSError as exc:
            raise _refusal(root, parts, dir_fd, exc) from None
    try:
        check_file(fd, root.joinpath(*parts))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_published(root: Path, rel: str | PurePosixPath, limit: int = READ_LIMIT) -> bytes:
    """The bytes of `root/rel`, read as `open_published` opens it; `TooLargeError` when it
    holds more than `limit` bytes (by its size, or by what a read gives)."""
    with os.fdopen(open_published(root, rel), "rb") as f:
        size = os.fstat(f.fileno()).st_size
        data = f.read(limit + 1) if size <= limit else b""
        if size > limit or len(data) > limit:
            shown = root.joinpath(*parts_of(rel))
            raise TooLargeError(
                f"{shown}: {max(size, len(data)):,} bytes, more than the {limit:,} a reader "
                "takes of it; refused unread"
            )
        return data


def read_head(root: Path, rel: str | PurePosixPath, limit: int) -> tuple[bytes, int]:
    """(the first `limit` bytes of `root/rel`, its size), read as `open_published` opens it:
    what a page shows of a file that may be of any size."""
    with os.fdopen(open_published(root, rel), "rb") as f:
        size = os.fstat(f.fileno()).st_size
        return f.read(limit), size


def copy_published(root: Path, rel: str | PurePosixPath, target: Path) -> None:
    """Copy `root/rel` (opened as `open_published` opens it) to a new file `target`."""
    with os.fdopen(open_published(root, rel), "rb") as source, target.open("xb") as out:
        shutil.copyfileobj(source, out, 1 << 20)


def check_published(root: Path, rel: str | PurePosixPath) -> int:
    """Raise as `open_published` would for `root/rel`; nothing is read. Its size in bytes."""
    fd = open_published(root, rel)
    try:
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def check_folder(root: Path, rel: str | PurePosixPath) -> None:
    """Raise `UnsafePathError` unless `root/rel` is a folder reached without a link (absent:
    `NotPublishedError`)."""
    with _folder(root, parts_of(rel)):
        pass


def tree_problems(root: Path, rel: str | PurePosixPath) -> list[str]:
    """One line per thing under the folder `root/rel` (its own path included) that a reader
    here would refuse: a symlink at any depth, anything but plain files and folders, a file
    with more than one name. An absent folder has none."""
    problems: list[str] = []

    def walk(parts: list[str], fd: int) -> None:
        for entry in sorted(os.scandir(fd), key=lambda e: e.name):
            here = [*parts, entry.name]
            shown = root.joinpath(*here)
            mode = entry.stat(follow_symlinks=False).st_mode
            if stat.S_ISDIR(mode):
                try:
                    child = os.open(entry.name, _DIR, dir_fd=fd)
                except OSError as exc:
                    problems.append(str(_refusal(root, here, fd, exc)))
                    continue
                try:
                    walk(here, child)
                finally:
                    os.close(child)
            elif stat.S_ISLNK(mode):
                problems.append(f"{shown}: a symlink, refused ({WHAT_TO_DO})")
            elif not stat.S_ISREG(mode):
                problems.append(f"{shown}: not a plain file, refused")
            elif entry.stat(follow_symlinks=False).st_nlink != 1:
                try:
                    os.close(open_published(root, PurePosixPath(*here)))
                except UnsafePathError as exc:
                    problems.append(str(exc))

    try:
        with _folder(root, parts_of(rel)) as fd:
            walk(parts_of(rel), fd)
    except NotPublishedError:
        return []
    except UnsafePathError as exc:
        return [str(exc)]
    return problems


def run_folder_problems(result_file: Path, run_id: str) -> list[str]:
    """One line per link (at any depth), odd file or hard link in the run folder `run_id` of
    the result file `result_file`, each naming it: nothing there may lead out of the results
    folder."""
    full = Path(os.path.abspath(result_file))
    rel = f"{full.parent.name}/{run_id}"
    return [f"{result_file}: run folder: {p}" for p in tree_problems(full.parent.parent, rel)]
