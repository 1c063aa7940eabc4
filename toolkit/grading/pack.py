"""Deterministic packing of a bundle, and extraction that cannot write outside its folder.

The size limit is measured on the archive the grader makes itself, so that the same bundle
always gives the same bytes, size and SHA-256 whoever submits it and whatever their file system
says: entries sorted by path, mtime 0, uid/gid 0, no user/group names, modes normalised to
0644/0755, gzip level 9 with no file name and mtime 0 in its header. Only regular files and
folders go in: a symlink, hard link, device or FIFO in a bundle is refused, not followed.

Extraction checks every member of an archive *before* writing anything: absolute paths, `..`
components, links and special files are refused, then regular files are written with
`O_EXCL | O_NOFOLLOW` under the destination.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import stat
import tarfile
from pathlib import Path, PurePosixPath

from pydantic import BaseModel, Field

MAX_MEMBERS = 10_000
MAX_UNPACKED_BYTES = 4 * 2**30  # a grader limit: 16 MB of gzip can hold terabytes of zeros


class BundleError(ValueError):
    """A bundle that cannot be packed or unpacked: a graded failure, with this message."""


class PackedBundle(BaseModel):
    """The archive the grader made of a bundle."""

    path: Path = Field(description="Where the .tar.gz was written.")
    sha256: str = Field(description="SHA-256 of the archive bytes.")
    packed_bytes: int = Field(description="Size of the archive: what the size limit applies to.")
    files: int = Field(description="Regular files in the bundle.")


def _walk(bundle_dir: Path) -> list[tuple[str, Path]]:
    """(archive name, path) of every folder and regular file, sorted; refuses anything else."""
    entries: list[tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(bundle_dir, followlinks=False):
        here = Path(dirpath)
        for name in [*dirnames, *filenames]:
            path = here / name
            rel = path.relative_to(bundle_dir).as_posix()
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                raise BundleError(f"{rel}: symbolic links are not allowed in a bundle")
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise BundleError(f"{rel}: only regular files and folders are allowed")
            entries.append((rel, path))
    return sorted(entries)


def pack_bundle(bundle_dir: Path, out: Path, *, give_up_bytes: int | None = None) -> PackedBundle:
    """Pack `bundle_dir` into `out` (.tar.gz) deterministically; raises BundleError if unfit.

    `give_up_bytes`: stop (BundleError) once the archive grows past this, so that a huge
    folder is refused in seconds instead of being compressed to the end.
    """
    if not bundle_dir.is_dir():
        raise BundleError(f"{bundle_dir}: the bundle must be a folder")
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        files = _write_archive(bundle_dir, out, give_up_bytes)
    except OSError as exc:  # e.g. a file that changed size or vanished while being packed
        raise BundleError(f"{bundle_dir}: could not pack the bundle ({exc})") from exc
    digest = hashlib.sha256()
    with out.open("rb") as packed:
        while block := packed.read(1 << 20):
            digest.update(block)
    return PackedBundle(
        path=out, sha256=digest.hexdigest(), packed_bytes=out.stat().st_size, files=files
    )


def _write_archive(bundle_dir: Path, out: Path, give_up_bytes: int | None) -> int:
    files = 0
    # Stream tar -> gzip -> file: a huge bundle must not be held in memory to be refused.
    with (
        out.open("wb") as f,
        gzip.GzipFile("", "wb", compresslevel=9, fileobj=f, mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for rel, path in _walk(bundle_dir):
            if give_up_bytes is not None and f.tell() > give_up_bytes:
                raise BundleError(
                    f"{bundle_dir}: the packed bundle passed {give_up_bytes:,} bytes before "
                    "its end; packing stopped (far over the size limit)"
                )
            info = tarfile.TarInfo(rel)
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if path.is_dir():
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                tar.addfile(info)
                continue
            info.mode = 0o755 if path.stat().st_mode & stat.S_IXUSR else 0o644
            info.size = path.stat().st_size
            with path.open("rb") as src:
                tar.addfile(info, src)
            files += 1
    return files


def _checked_name(member: tarfile.TarInfo) -> PurePosixPath:
    name = PurePosixPath(member.name)
    if member.name.startswith("/") or name.is_absolute():
        raise BundleError(f"archive member '{member.name}': absolute paths are not allowed")
    if ".." in name.parts:
        raise BundleError(f"archive member '{member.name}': '..' is not allowed in a path")
    if member.issym() or member.islnk():
        raise BundleError(f"archive member '{member.name}': links are not allowed")
    if not (member.isfile() or member.isdir()):
        raise BundleError(f"archive member '{member.name}': only files and folders are allowed")
    return name


def extract_bundle(archive: Path, dest: Path) -> None:
    """Extract a bundle archive into the empty folder `dest`, refusing unsafe members first."""
    try:
        with tarfile.open(archive, mode="r:*") as tar:
            members = tar.getmembers()
            if len(members) > MAX_MEMBERS:
                raise BundleError(f"{archive}: more than {MAX_MEMBERS} entries")
            checked = [(m, _checked_name(m)) for m in members]  # all checks before any write
            unpacked = sum(m.size for m in members if m.isfile())
            if unpacked > MAX_UNPACKED_BYTES:
                raise BundleError(
                    f"{archive}: unpacks to {unpacked:,} bytes, more than the grader's "
                    f"{MAX_UNPACKED_BYTES:,}"
                )
            dest.mkdir(parents=True, exist_ok=True)
            root = dest.resolve()
            for member, name in checked:
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
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                fd = os.open(target, flags, 0o755 if member.mode & 0o100 else 0o644)
                with os.fdopen(fd, "wb") as out:
                    while block := source.read(1 << 20):
                        out.write(block)
    except (tarfile.TarError, EOFError, OSError, gzip.BadGzipFile) as exc:
        raise BundleError(f"{archive}: not a readable bundle archive ({exc})") from exc
