"""Deterministic packing of a bundle that never follows a link, and extraction that cannot escape.

The size limit is measured on the archive the grader makes itself, so that the same bundle
always gives the same bytes, size and SHA-256 whoever submits it and whatever their file system
says: entries sorted by path, mtime 0, uid/gid 0, no user/group names, modes normalised to
0644/0755, gzip level 9 with no file name and mtime 0 in its header. Only regular files and
folders go in: a symlink, hard link, device, socket or FIFO in a bundle is refused, not followed.

Packing runs with the harness's privileges (root) on a folder the agent controls and can change
while it is being packed, so nothing here trusts a path twice. The folder is reached from `/`
one component at a time with `O_NOFOLLOW`, listed through its directory descriptor, and every
entry is opened relative to the descriptor of its own folder (`openat`), again with
`O_NOFOLLOW`. Each opened object is checked with `fstat` to be the very one listed (device and
inode), of the listed type, with one link only, and a file's bytes are copied to exactly its
listed size: a folder swapped for a symlink, a file swapped for a FIFO or a hard link to a file
of another user, or a file that grows or shrinks while packed, is a `BundleError`.

Extraction reads the archive as a stream and checks every member *before* writing anything:
member count and unpacked size are counted while streaming (an archive of a million empty
members is refused after the first `MAX_MEMBERS`, not after listing them all), and absolute
paths, `..`, links, special files and oversized headers are refused. Only then are the regular
files written, with `O_EXCL | O_NOFOLLOW`, under the destination.
"""

from __future__ import annotations

import bz2
import contextlib
import errno
import gzip
import hashlib
import io
import lzma
import os
import stat
import tarfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from pydantic import BaseModel, Field

MAX_MEMBERS = 10_000
MAX_UNPACKED_BYTES = 4 * 2**30  # a grader limit: 16 MB of gzip can hold terabytes of zeros
MAX_DEPTH = 64  # folders nested deeper than this are refused (and recursion stays bounded)
MAX_READ = 4 * 2**20  # largest single read of the decompressed stream: bounds header sizes
COPY_BLOCK = 1 << 20

_PATH = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO swapped in after listing must not hang the packer in open().
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class BundleError(ValueError):
    """A bundle that cannot be packed or unpacked: a graded failure, with this message."""


class PackedBundle(BaseModel):
    """The archive the grader made of a bundle."""

    path: Path = Field(description="Where the .tar.gz was written.")
    sha256: str = Field(description="SHA-256 of the archive bytes.")
    packed_bytes: int = Field(description="Size of the archive: what the size limit applies to.")
    files: int = Field(description="Regular files in the bundle.")


# -- packing -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Entry:
    """One folder or regular file as listed, identified by device and inode."""

    parts: tuple[str, ...]
    is_dir: bool
    dev: int
    ino: int
    size: int
    executable: bool

    @property
    def name(self) -> str:
        return "/".join(self.parts)


def _checked_entry_name(name: str, where: str) -> str:
    """Names go into the archive as UTF-8 text: refuse undecodable bytes and control bytes."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise BundleError(f"{where}: a file name in the bundle is not valid UTF-8") from None
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise BundleError(f"{where}: a file name in the bundle holds a control character")
    return name


def _open_folder_nofollow(bundle_dir: Path) -> int:
    """A descriptor of `bundle_dir`, reached from `/` without following any symbolic link."""
    path = Path(os.path.abspath(bundle_dir))
    fd = os.open("/", _PATH)
    try:
        parts = path.parts[1:]
        for i, part in enumerate(parts):
            flags = _FOLDER if i == len(parts) - 1 else _PATH
            try:
                child = os.open(part, flags, dir_fd=fd)
            except OSError as exc:
                here = Path("/", *parts[: i + 1])
                if exc.errno in (errno.ENOTDIR, errno.ELOOP):
                    raise BundleError(
                        f"{bundle_dir}: {here} is a symbolic link or not a folder; the bundle "
                        "must be a real folder, reached without links (pass its real path)"
                    ) from None
                raise BundleError(f"{bundle_dir}: cannot open {here} ({exc.strerror})") from None
            os.close(fd)
            fd = child
        if not parts:
            raise BundleError(f"{bundle_dir}: the bundle cannot be the root folder")
        return fd
    except BaseException:
        os.close(fd)
        raise


def _open_child(parent: int, entry: _Entry, flags: int, where: str) -> int:
    """Open `entry` in the folder `parent` without following links; check it is the one listed."""
    try:
        fd = os.open(entry.parts[-1], flags, dir_fd=parent)
    except OSError as exc:
        raise BundleError(
            f"{where}: {entry.name} changed while being packed ({exc.strerror}); "
            "leave the folder alone until `submit` returns"
        ) from None
    st = os.fstat(fd)
    wanted = stat.S_ISDIR if entry.is_dir else stat.S_ISREG
    if not wanted(st.st_mode) or (st.st_dev, st.st_ino) != (entry.dev, entry.ino):
        os.close(fd)
        raise BundleError(
            f"{where}: {entry.name} was replaced while being packed; leave the folder alone "
            "until `submit` returns"
        )
    if not entry.is_dir and st.st_nlink != 1:
        os.close(fd)
        raise BundleError(f"{where}: {entry.name}: hard links are not allowed in a bundle")
    return fd


@dataclass
class _Listing:
    """What `_list` has found so far, with running totals for the limits."""

    where: str
    entries: list[_Entry]
    unpacked: int = 0


CACHE_DIR = "__pycache__"
"""Folders left out of every packed bundle: what Python writes when it imports the bundle's
sources (a loader never reads its byte code without the source beside it)."""


def _list(folder: int, parts: tuple[str, ...], found: _Listing) -> None:
    """Add every entry below the open `folder` to `found`; refuse links and special files."""
    where = found.where
    if len(parts) >= MAX_DEPTH:
        raise BundleError(f"{where}: folders nested deeper than {MAX_DEPTH} levels")
    items: list[tuple[str, os.stat_result]] = []
    with os.scandir(folder) as listing:
        for e in listing:  # counted as listed: a folder of millions of names is refused early
            if len(found.entries) + len(items) >= MAX_MEMBERS:
                raise BundleError(f"{where}: more than {MAX_MEMBERS:,} files and folders")
            items.append((e.name, e.stat(follow_symlinks=False)))
    for name, st in sorted(items):
        if name == CACHE_DIR and stat.S_ISDIR(st.st_mode):
            continue  # Python's own byte-code cache: remade from the sources, never packed
        rel = (*parts, _checked_entry_name(name, where))
        shown = "/".join(rel)
        if stat.S_ISLNK(st.st_mode):
            raise BundleError(f"{shown}: symbolic links are not allowed in a bundle")
        if stat.S_ISREG(st.st_mode):
            if st.st_nlink != 1:
                raise BundleError(f"{shown}: hard links are not allowed in a bundle")
        elif not stat.S_ISDIR(st.st_mode):
            raise BundleError(f"{shown}: only regular files and folders are allowed")
        entry = _Entry(
            parts=rel,
            is_dir=stat.S_ISDIR(st.st_mode),
            dev=st.st_dev,
            ino=st.st_ino,
            size=0 if stat.S_ISDIR(st.st_mode) else st.st_size,
            executable=bool(st.st_mode & stat.S_IXUSR),
        )
        found.entries.append(entry)
        found.unpacked += entry.size
        if len(found.entries) > MAX_MEMBERS:
            raise BundleError(f"{where}: more than {MAX_MEMBERS:,} files and folders")
        if found.unpacked > MAX_UNPACKED_BYTES:
            limit = f"{MAX_UNPACKED_BYTES:,}"
            raise BundleError(f"{where}: the files add up to more than {limit} bytes")
        if entry.is_dir:
            child = _open_child(folder, entry, _FOLDER, where)
            try:
                _list(child, rel, found)
            finally:
                os.close(child)


class _Folders:
    """Descriptors of the bundle's folders, reopened link-free and checked against the listing."""

    def __init__(self, root: int, where: str, folders: dict[tuple[str, ...], _Entry]) -> None:
        self.root, self.where, self.folders = root, where, folders
        self._open: tuple[tuple[str, ...], int] | None = None  # the last folder used

    def fd(self, parts: tuple[str, ...]) -> int:
        if not parts:
            return self.root
        if self._open is not None and self._open[0] == parts:
            return self._open[1]
        self.close()
        fd = os.dup(self.root)
        try:
            for depth in range(1, len(parts) + 1):
                child = _open_child(fd, self.folders[parts[:depth]], _FOLDER, self.where)
                os.close(fd)
                fd = child
        except BaseException:
            os.close(fd)
            raise
        self._open = (parts, fd)
        return fd

    def close(self) -> None:
        if self._open is not None:
            os.close(self._open[1])
            self._open = None


class _ExactFile(io.RawIOBase):
    """A listed file's bytes: exactly `size` of them, or a BundleError if it changed size."""

    def __init__(self, fd: int, size: int, name: str) -> None:
        self.fd, self.left, self.name_ = fd, size, name

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        wanted = min(len(buffer), self.left)
        done = 0
        while done < wanted:  # full reads only: tarfile takes a short one for the end
            data = os.read(self.fd, wanted - done)
            if not data:
                raise BundleError(f"{self.name_}: the file shrank while being packed")
            buffer[done : done + len(data)] = data
            done += len(data)
        self.left -= done
        return done

    def check_end(self) -> None:
        if os.read(self.fd, 1):
            raise BundleError(f"{self.name_}: the file grew while being packed")


def pack_bundle(bundle_dir: Path, out: Path, *, give_up_bytes: int | None = None) -> PackedBundle:
    """Pack `bundle_dir` into `out` (.tar.gz) deterministically; raises BundleError if unfit.

    `bundle_dir` must be reachable without symbolic links (resolve a path you trust first);
    nothing inside it is ever followed. `give_up_bytes`: stop (BundleError) once the archive
    grows past this, so that a huge folder is refused in seconds instead of being compressed
    to the end.
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    root = _open_folder_nofollow(bundle_dir)
    try:
        where = str(bundle_dir)
        found = _Listing(where, [])
        _list(root, (), found)
        entries = sorted(found.entries, key=lambda e: e.name)
        folders = {e.parts: e for e in entries if e.is_dir}
        files = _write_archive(_Folders(root, where, folders), entries, out, give_up_bytes)
    except OSError as exc:  # e.g. a folder that vanished while being listed
        raise BundleError(f"{bundle_dir}: could not pack the bundle ({exc})") from exc
    finally:
        os.close(root)
    digest = hashlib.sha256()
    with out.open("rb") as packed:
        while block := packed.read(1 << 20):
            digest.update(block)
    return PackedBundle(
        path=out, sha256=digest.hexdigest(), packed_bytes=out.stat().st_size, files=files
    )


def _write_archive(
    folders: _Folders, entries: list[_Entry], out: Path, give_up_bytes: int | None
) -> int:
    files = 0
    # Stream tar -> gzip -> file: a huge bundle must not be held in memory to be refused.
    try:
        with (
            out.open("wb") as f,
            gzip.GzipFile("", "wb", compresslevel=9, fileobj=f, mtime=0) as gz,
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
        ):
            for entry in entries:
                if give_up_bytes is not None and f.tell() > give_up_bytes:
                    raise BundleError(
                        f"{folders.where}: the packed bundle passed {give_up_bytes:,} bytes "
                        "before its end; packing stopped (far over the size limit)"
                    )
                info = tarfile.TarInfo(entry.name)
                info.mtime = 0
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                parent = folders.fd(entry.parts[:-1])
                if entry.is_dir:
                    os.close(_open_child(parent, entry, _FOLDER, folders.where))
                    info.type = tarfile.DIRTYPE
                    info.mode = 0o755
                    tar.addfile(info)
                    continue
                info.mode = 0o755 if entry.executable else 0o644
                info.size = entry.size
                fd = _open_child(parent, entry, _FILE, folders.where)
                try:
                    source = _ExactFile(fd, entry.size, entry.name)
                    tar.addfile(info, source)
                    source.check_end()
                finally:
                    os.close(fd)
                files += 1
    finally:
        folders.close()
    return files


# -- extraction ----------------------------------------------------------------------------


class _Stream(io.RawIOBase):
    """The decompressed archive, read forward only, in reads no larger than `MAX_READ`.

    tarfile reads a PAX or GNU long-name header in one `read` of its whole declared size; the
    cap turns a header of gigabytes into an error instead of an allocation.
    """

    def __init__(self, raw: _Plain) -> None:
        self.raw = raw
        self.position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0 or size > MAX_READ:
            raise BundleError(f"an archive header or block of {size} bytes: too large")
        data = self.raw.read(size)
        self.position += len(data)
        return data

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        target = offset if whence == io.SEEK_SET else self.position + offset
        if whence not in (io.SEEK_SET, io.SEEK_CUR) or target < self.position:
            # tarfile only ever moves forward over a well-formed stream.
            raise BundleError("the archive asked to be read backwards: not a plain tar stream")
        while self.position < target:  # skip forward in bounded reads
            if not self.read(min(COPY_BLOCK, target - self.position)):
                break
        return self.position

    def tell(self) -> int:
        return self.position


_Plain = gzip.GzipFile | bz2.BZ2File | lzma.LZMAFile | BinaryIO


def _decompressed(archive: BinaryIO) -> _Plain:
    """The archive's tar stream, whatever it is compressed with (gzip, bzip2, xz or none)."""
    magic = archive.read(6)
    archive.seek(0)
    if magic.startswith(b"\x1f\x8b"):
        return gzip.GzipFile(fileobj=archive, mode="rb")
    if magic.startswith(b"BZh"):
        return bz2.BZ2File(archive, "rb")
    if magic.startswith(b"\xfd7zXZ\x00"):
        return lzma.LZMAFile(archive, "rb")
    return archive


def _checked_name(member: tarfile.TarInfo) -> PurePosixPath:
    name = PurePosixPath(member.name)
    if member.name.startswith("/") or name.is_absolute():
        raise BundleError(f"archive member '{member.name}': absolute paths are not allowed")
    if ".." in name.parts:
        raise BundleError(f"archive member '{member.name}': '..' is not allowed in a path")
    if member.issym() or member.islnk():
        raise BundleError(f"archive member '{member.name}': links are not allowed")
    if member.issparse() or not (member.isfile() or member.isdir()):
        raise BundleError(f"archive member '{member.name}': only files and folders are allowed")
    if any(ord(c) < 32 for c in member.name):
        raise BundleError(f"archive member {member.name!r}: control characters in its name")
    return name


@dataclass(frozen=True)
class _Member:
    name: PurePosixPath
    is_dir: bool
    size: int
    executable: bool


def _members(archive: Path) -> Iterator[tuple[tarfile.TarInfo, tarfile.TarFile]]:
    """Stream the members of `archive` (never listing them all), with the open TarFile."""
    with archive.open("rb") as raw, contextlib.closing(_decompressed(raw)) as plain:
        stream = _Stream(plain)
        with tarfile.open(fileobj=stream, mode="r:") as tar:
            count = 0
            while (member := tar.next()) is not None:
                count += 1
                if count > MAX_MEMBERS:
                    raise BundleError(f"{archive}: more than {MAX_MEMBERS:,} entries")
                read: list[tarfile.TarInfo] = tar.members  # type: ignore[attr-defined]
                read.clear()  # tarfile keeps every member it has read: keep none
                yield member, tar


def _scan(archive: Path) -> list[_Member]:
    """Every member, checked, before anything is written (first pass over the stream)."""
    checked: list[_Member] = []
    seen: set[PurePosixPath] = set()
    unpacked = 0
    for member, _tar in _members(archive):
        name = _checked_name(member)
        if name in seen and not member.isdir():
            raise BundleError(f"archive member '{member.name}': appears twice")
        seen.add(name)
        if member.isfile():
            unpacked += member.size
            if unpacked > MAX_UNPACKED_BYTES:
                raise BundleError(
                    f"{archive}: unpacks to more than the grader's {MAX_UNPACKED_BYTES:,} bytes"
                )
        checked.append(_Member(name, member.isdir(), member.size, bool(member.mode & 0o100)))
    return checked


def extract_bundle(archive: Path, dest: Path) -> None:
    """Extract a bundle archive into the empty folder `dest`, refusing unsafe members first."""
    try:
        checked = _scan(archive)
        dest.mkdir(parents=True, exist_ok=True)
        root = dest.resolve()
        for (member, tar), expected in zip(_members(archive), checked, strict=True):
            name = _checked_name(member)
            if (name, member.isdir(), member.size) != (
                expected.name,
                expected.is_dir,
                expected.size,
            ):
                raise BundleError(f"{archive}: the archive changed while being extracted")
            target = root.joinpath(*name.parts) if name.parts else root
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.parent.resolve() != target.parent or not target.is_relative_to(root):
                raise BundleError(f"archive member '{member.name}': leads outside the bundle")
            source = tar.extractfile(member)
            if source is None:
                raise BundleError(f"archive member '{member.name}': unreadable")
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(target, flags, 0o755 if expected.executable else 0o644)
            with os.fdopen(fd, "wb") as out:
                while block := source.read(COPY_BLOCK):
                    out.write(block)
    except (tarfile.TarError, EOFError, OSError, zlib.error, lzma.LZMAError) as exc:
        raise BundleError(f"{archive}: not a readable bundle archive ({exc})") from exc
    except ValueError as exc:  # e.g. a corrupt bz2 stream; BundleError passes through as is
        if isinstance(exc, BundleError):
            raise
        raise BundleError(f"{archive}: not a readable bundle archive ({exc})") from exc
