"""A folder with a hard size cap for as long as it is needed: a filesystem of its own on it.

A sandbox's root is a host folder. The local backend caps each file written there
(`file_size_bytes`) and, for an ephemeral root, everything a command writes (`disk_bytes`); but
a root that must keep files between commands (a run's workspace, where an agent trains and
keeps checkpoints from one `runner` call to the next) lives on the host's disk, which a hostile
agent could fill with file after file. `cap_folder` mounts a filesystem of a fixed size on
such a folder instead, for as long as the caller needs it:

- `ext4` (preferred: needs root, `mkfs.ext4`, `mount` and loop devices): a sparse image file
  beside the folder (`.NAME.ari-cap.img`, readable by root only), formatted without a journal
  (nothing in it must survive a crash) and loop-mounted. Its size is at most half of the disk's
  free space less what the live images there may still write (`promised_bytes`), so caps
  made one after another never promise more than the disk had. The host's disk holds what was
  written, never more than the cap; past it, writes fail with ENOSPC, a little earlier for
  sandboxed code than for the host (root keeps up to 16 MiB, so that a harness writing
  there, such as a run's `runner` channel, still can when an agent has filled it).
- `tmpfs`: memory-backed and instant, for caps that fit in memory (a quarter of it at most):
  what is written takes memory, not disk.

`release(folder)` unmounts what `cap_folder` mounted on or under the folder, detaches the loop
devices backing its image and deletes the image. It needs nothing but the folder's path, so
whoever finds a folder left by a process that died (a run's recovery) can clean it. The
sandbox layer reports a root on such a folder as `root-disk-cap` (`capped_size`).

Set-up and teardown times and what happens at the cap: `benchmarks/bench_capped.py`.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import logging
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from toolkit.sandbox.mountinfo import mountinfo

log = logging.getLogger(__name__)

IMAGE_SUFFIX = ".ari-cap.img"
TMPFS_SOURCE = "ari-capped"
KINDS = ("auto", "ext4", "tmpfs")
MIN_BYTES = 8 * 2**20
"""Smaller caps are raised to this (ext4 needs room for its own bookkeeping)."""
FREE_SHARE = 0.5
"""An image may take at most this share of the space free where it lives, not counting what
the live images there (other runs' workspaces) may still write: a cap larger than that would
not protect the disk, and others share it."""
MEMORY_SHARE = 0.25
"""A tmpfs cap may be at most this share of the host's memory."""
RESERVED_BYTES = 16 * 2**20
RESERVED_PERCENT_MAX = 5.0
"""An ext4 cap keeps this much (at most this share) for root: the host's own writes."""
TOOL_TIMEOUT_S = 120
MNT_DETACH = 2
LOOP_CLR_FD = 0x4C01
MS_NOSUID = 0x2
MS_NODEV = 0x4
_libc = ctypes.CDLL(None, use_errno=True)


@dataclass(frozen=True)
class CappedFolder:
    """A folder with a filesystem of `size_bytes` mounted on it, until `release()`."""

    path: Path
    size_bytes: int
    """The size of the filesystem (its own bookkeeping takes a little of it)."""
    kind: str
    """"ext4" (a loop-mounted image beside the folder) or "tmpfs"."""

    def release(self) -> list[str]:
        """Unmount it, detach its loop device, delete its image (see `release`)."""
        return release(self.path)


def image_of(folder: Path) -> Path:
    """Where the image of a capped `folder` lives: beside it, hidden, root-only."""
    folder = Path(os.path.abspath(folder))
    return folder.parent / f".{folder.name}{IMAGE_SUFFIX}"


def unavailable(kind: str) -> str | None:
    """Why this host cannot make a capped folder of `kind` ("ext4" or "tmpfs"); None if it can."""
    if os.geteuid() != 0:
        return "mounting a filesystem needs root"
    if kind == "tmpfs":
        return None
    missing = [tool for tool in ("mkfs.ext4", "mount") if _tool(tool) is None]
    if missing:
        return f"{' and '.join(missing)} not found"
    if not os.path.exists("/dev/loop-control"):
        return "no loop devices (/dev/loop-control)"
    return None


def _tool(name: str) -> str | None:
    return shutil.which(name, path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin:/usr/bin:/bin")


def cap_folder(folder: Path, size_bytes: int, *, kind: str = "auto") -> CappedFolder | None:
    """Mount a filesystem of `size_bytes` on `folder` (created if missing; it must be empty),
    owned by root with mode 0755, empty.

    `kind`: "ext4", "tmpfs", or "auto" (ext4 where the host allows, else tmpfs where the cap
    fits in memory). A cap above what the host can back (the free disk, a share of the
    memory) is lowered to that, with a warning. Returns None, with a warning that says why,
    where this host cannot: the caller goes on with an uncapped folder (and says so).
    """
    if kind not in KINDS:
        raise ValueError(f"unknown capped folder kind {kind!r}; known: {', '.join(KINDS)}")
    folder = Path(os.path.abspath(folder))
    folder.mkdir(parents=True, exist_ok=True)
    if any(folder.iterdir()):
        raise ValueError(f"{folder} is not empty: a capped folder starts empty")
    size = max(int(size_bytes), MIN_BYTES)
    if kind == "auto":
        kind = "tmpfs" if unavailable("ext4") and size <= _memory_cap() else "ext4"
    reason = unavailable(kind)
    if reason is None and kind == "ext4":
        promised = promised_bytes(folder.parent)
        room = int(max(0, _free_bytes(folder.parent) - promised) * FREE_SHARE)
        if size > room:
            log.warning(
                "sandbox: cap of %s lowered to %d bytes (the free disk, less the %d bytes that "
                "other capped folders on it may still take)",
                folder,
                room,
                promised,
            )
            size = room
        reason = "the disk is full" if size < MIN_BYTES else None
    elif reason is None and size > _memory_cap():
        log.warning("sandbox: tmpfs cap of %s lowered to a quarter of the memory", folder)
        size = _memory_cap()
    if reason is not None:
        log.warning("sandbox: %s gets no size cap: %s", folder, reason)
        return None
    try:
        if kind == "ext4":
            _mount_image(folder, size)
        else:
            options = f"size={size},nr_inodes={max(1024, size // 8192)},mode=0755"
            if _libc.mount(
                TMPFS_SOURCE.encode(),
                str(folder).encode(),
                b"tmpfs",
                ctypes.c_ulong(MS_NOSUID | MS_NODEV),
                options.encode(),
            ):
                raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()), str(folder))
        folder.chmod(0o755)
    except (OSError, subprocess.SubprocessError) as exc:
        release(folder)
        log.warning("sandbox: %s gets no size cap: %s", folder, exc)
        return None
    return CappedFolder(folder, size, kind)


def _mount_image(folder: Path, size: int) -> None:
    """A sparse image of `size` bytes, formatted ext4 and loop-mounted on `folder`."""
    image = image_of(folder)
    fd = os.open(image, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        os.ftruncate(fd, size)
    finally:
        os.close(fd)
    # No journal (nothing in it must survive a crash); inode tables are never zeroed on the
    # image (a sparse file reads as zeros already). A little room is kept for root, that is
    # for the host: it can still answer through files there (a run's `runner` channel) when
    # sandboxed code has filled the rest. (Both tools were found by `unavailable`.)
    reserved = min(RESERVED_PERCENT_MAX, 100 * RESERVED_BYTES / size)
    _run(
        [
            _tool("mkfs.ext4") or "mkfs.ext4",
            "-q",
            "-F",
            "-m",
            f"{reserved:.3f}",
            "-O",
            "^has_journal",
            "-E",
            "lazy_itable_init=1,nodiscard,root_owner=0:0",
            "-L",
            TMPFS_SOURCE,
            str(image),
        ]
    )
    options = "loop,nosuid,nodev,noinit_itable"
    _run([_tool("mount") or "mount", "-t", "ext4", "-o", options, str(image), str(folder)])
    lost = folder / "lost+found"  # e2fsck's, never used here: the folder starts empty
    with contextlib.suppress(FileNotFoundError):
        lost.rmdir()


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()
        raise OSError(f"{Path(argv[0]).name} failed: {detail[-1] if detail else done.returncode}")


def _free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def live_images() -> list[Path]:
    """The images of capped folders that are attached to a loop device now (in use)."""
    found = set()
    with contextlib.suppress(OSError):
        for name in os.listdir("/sys/block"):
            backing = _backing_file(f"/dev/{name}")
            if backing is not None and backing.endswith(IMAGE_SUFFIX):
                found.add(Path(backing))
    return sorted(found)


def promised_bytes(where: Path) -> int:
    """What the live images on the filesystem of `where` may still write there: each is a
    sparse file, its size promised but only its written blocks taken."""
    device = os.stat(where).st_dev
    total = 0
    for image in live_images():
        with contextlib.suppress(OSError):
            st = os.stat(image)
            if st.st_dev == device:
                total += max(0, st.st_size - st.st_blocks * 512)
    return total


def _memory_cap() -> int:
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * MEMORY_SHARE)


# -- finding and releasing -------------------------------------------------------------------


@dataclass(frozen=True)
class _Mount:
    point: Path
    fstype: str
    source: str


def _mounts() -> list[_Mount]:
    """This mount namespace's mounts."""
    return [_Mount(Path(point), fstype, source) for point, fstype, source in mountinfo()]


def _backing_file(device: str) -> str | None:
    """The file behind loop device `device` (/dev/loopN), without a "(deleted)" mark."""
    name = os.path.basename(device)
    if not name.startswith("loop"):
        return None
    try:
        text = Path(f"/sys/block/{name}/loop/backing_file").read_text().strip()
    except OSError:
        return None
    return text.removesuffix(" (deleted)")


def _is_ours(mount: _Mount) -> bool:
    if mount.fstype == "tmpfs":
        return mount.source == TMPFS_SOURCE
    backing = _backing_file(mount.source) if mount.fstype == "ext4" else None
    return backing is not None and backing.endswith(IMAGE_SUFFIX)


def capped_size(path: Path) -> int | None:
    """The size of the capped filesystem (made by `cap_folder`) that `path` lies on, or None
    when it lies elsewhere (on the host's own disk, say)."""
    path = Path(os.path.abspath(path))
    try:
        mounts = _mounts()
    except OSError:
        return None
    holding = [m for m in mounts if m.point == path or m.point in path.parents]
    if not holding:
        return None
    deepest = max(holding, key=lambda m: len(m.point.parts))  # the last one wins on ties
    if not _is_ours(deepest):
        return None
    st = os.statvfs(deepest.point)
    return st.f_blocks * st.f_frsize


def release(folder: Path) -> list[str]:
    """Unmount every capped filesystem on or under `folder`, detach the loop devices backing
    their images and delete the images; idempotent. Returns what it did, for the log.

    A filesystem still in use (a process working in it) is detached lazily: it vanishes from
    the folder at once and is freed when the last user is gone.
    """
    folder = Path(os.path.abspath(folder))
    done: list[str] = []
    try:
        mounts = [m for m in _mounts() if m.point == folder or folder in m.point.parents]
    except OSError:
        mounts = []
    for mount in sorted(mounts, key=lambda m: len(m.point.parts), reverse=True):
        if not _is_ours(mount):
            continue
        target = str(mount.point).encode()
        if _libc.umount2(target, 0) != 0:
            err = ctypes.get_errno()
            if err == errno.EINVAL:  # no longer a mount point
                continue
            if _libc.umount2(target, MNT_DETACH) != 0:
                err = ctypes.get_errno()
                log.warning("sandbox: cannot unmount %s: %s", mount.point, os.strerror(err))
                continue
        done.append(f"unmounted {mount.fstype} from {mount.point}")
    # Images: the folder's own, and any under it (its mounts are gone: only images are left).
    # Walked without following links: whatever a sandbox planted there leads nowhere else.
    images = {image_of(folder), *(image_of(m.point) for m in mounts)}
    for top, _dirs, files in os.walk(folder):
        images.update(Path(top, name) for name in files if name.endswith(IMAGE_SUFFIX))
    for image in sorted(images):
        if image.is_file() and not image.is_symlink():
            done += _drop_image(image)
    return done


def _drop_image(image: Path) -> list[str]:
    """Detach the loop devices backed by `image` and delete it."""
    done = []
    for device in _loops_backed_by(image):
        try:
            fd = os.open(device, os.O_RDONLY | os.O_CLOEXEC)
            try:
                fcntl.ioctl(fd, LOOP_CLR_FD, 0)  # busy: detached when its last user goes
            finally:
                os.close(fd)
            done.append(f"detached {device}")
        except OSError as exc:
            if exc.errno != errno.ENXIO:  # ENXIO: already detached
                log.warning("sandbox: cannot detach %s: %s", device, exc.strerror)
    image.unlink()
    done.append(f"deleted {image}")
    return done


def _loops_backed_by(image: Path) -> list[str]:
    wanted = os.path.realpath(image)
    found = []
    with contextlib.suppress(OSError):
        for name in sorted(os.listdir("/sys/block")):
            if _backing_file(f"/dev/{name}") == wanted:
                found.append(f"/dev/{name}")
    return found
