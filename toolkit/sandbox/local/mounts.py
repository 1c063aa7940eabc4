"""The filesystem a sandboxed tree sees, built by its first process in a new mount namespace.

The host side (`layout.py`) decides what goes where and sends a plan; this module carries it
out with mount calls, in this order:

1. Open every path to expose (the sandbox root, read-only paths) as an O_PATH descriptor, so
   it can be bound back in after the views above it have changed. Detach the capped folders
   (`capped.py`) that hold none of them: other runs' workspaces, not this tree's business;
   and every mount inside a folder that will be covered (a second disk under /srv), so that
   not even its name stays in the tree's mountinfo.
2. Make every mount of the host read-only, recursively (`mount_setattr`, or where the kernel
   is older than 5.12, a read-only remount of each mount listed in mountinfo). Device nodes
   keep working: a read-only mount refuses changes to files, not I/O on devices.
3. A fresh /proc for the tree's PID namespace, with /proc/sys read-only.
4. One tmpfs, capped in size and inode count, holding a folder for each private writable place
   (/tmp, /var/tmp, /dev/shm, /run with /run/lock, ...): each folder is bound onto its place,
   so the cap is on what the tree writes to all of them together. It dies with the namespace.
5. Outer paths first: covers (an empty tmpfs over a folder the sandbox may not see but that
   holds something exposed: a hidden folder, the caller's home, a folder `nobody` cannot
   traverse), then the exposed paths bound on top (the root read-write, the others
   read-only). Covers become read-only once everything inside them is in place. An
   ephemeral root is not bound but overlaid: an overlay filesystem whose lower layer is the
   root folder and whose upper (writable) layer is a folder of the places' tmpfs, so what the
   tree writes under its root counts against the same cap and dies with it, and the host's
   folder is never written.
6. The cgroup view (`cgroup_view`): /sys/fs/cgroup shows the tree's own cgroups only, each
   hierarchy it joined mounted afresh inside its cgroup namespace (whose root is the tree's
   own cgroup), on an empty tmpfs; no other sandbox's cgroup, nor the host's (issue #38).
7. Hidden paths: an empty read-only tmpfs over a folder, /dev/null over a file. Then the
   neutral views (`neutral`: /proc/stat, /proc/loadavg): a read-only file of fixed text,
   made in the places' tmpfs beside the place folders, bound over each. A hidden path
   inside the writable root must still be the file the host meant (same device and inode):
   otherwise another sandbox sharing the root moved it, and the tree is not started. (In an
   ephemeral root that is checked in the root folder itself, just before the overlay is
   mounted: an overlay reports inode numbers of its own.)

Every mount target is opened without following symlinks (`openat2` with RESOLVE_NO_SYMLINKS):
the paths in the plan are canonical, so a symlink on the way was planted by sandboxed code and
is refused rather than followed. Stdlib only (the launcher runs with `-I -S`); failures raise
`SetupError`, which the launcher reports as the sandbox breaking.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING or __package__:
    from toolkit.sandbox.mountinfo import mountinfo
else:  # imported by the launcher run as a script: the shared helper, by path (launcher.py)
    from mountinfo import mountinfo

MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MNT_DETACH = 2
MOUNT_FLAGS_KEPT = 0x2 | 0x4 | 0x8 | 0x400 | 0x800 | 0x1000  # nosuid nodev noexec *atime
AT_FDCWD = -100
AT_EMPTY_PATH = 0x1000
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY = 0x1
CGROUP_VIEW = "/sys/fs/cgroup"
VIEW_FLAGS = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
SYS_OPENAT2 = 437  # the same number on every architecture (the unified syscall table)
SYS_MOUNT_SETATTR = 442
COVER_OPTIONS = "mode=0755,size=1m"
HIDE_OPTIONS = "mode=0555,size=4k"

_libc = ctypes.CDLL(None, use_errno=True)


class SetupError(Exception):
    """The plan could not be carried out: the sandbox is broken, not the command."""


class RootAltered(SetupError):
    """A path the plan keeps inside the sandbox's writable root (one it hides) was moved,
    replaced or made a link by the root's own users: their doing, not the sandbox's."""

    MARK = "root altered: "
    """How the launcher's status line says so (the host raises `SandboxRootAltered`)."""

    def __init__(self, what: str) -> None:
        super().__init__(self.MARK + what)


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def fd_path(fd: int) -> str:
    return f"/proc/self/fd/{fd}"


def mount(
    source: str | None, target: str, fstype: str | None, flags: int, data: str | None
) -> None:
    rc = _libc.mount(
        source.encode() if source else None,
        target.encode(),
        fstype.encode() if fstype else None,
        ctypes.c_ulong(flags),
        data.encode() if data else None,
    )
    if rc != 0:
        err = ctypes.get_errno()
        raise SetupError(f"mount {source} on {target} failed: {os.strerror(err)}")


def open_target(path: str, dir_fd: int = AT_FDCWD) -> int:
    """An O_PATH descriptor of `path` (relative to `dir_fd` if given, never leaving it),
    refusing any symlink on the way (SetupError)."""
    flags = os.O_PATH | os.O_CLOEXEC  # no O_NOFOLLOW: a symlink at the end must fail too
    resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS
    resolve |= 0 if dir_fd == AT_FDCWD else RESOLVE_BENEATH
    how = _OpenHow(flags, 0, resolve)
    fd = _libc.syscall(
        ctypes.c_long(SYS_OPENAT2),
        ctypes.c_long(dir_fd),
        ctypes.c_char_p(path.encode()),
        ctypes.byref(how),
        ctypes.c_size_t(ctypes.sizeof(how)),
    )
    if fd >= 0:
        return int(fd)
    err = ctypes.get_errno()
    if err == errno.ELOOP:
        raise SetupError(f"refusing to mount on {path}: a symlink lies on the way")
    if err != errno.ENOSYS:
        raise SetupError(f"cannot open {path} to mount on it: {os.strerror(err)}")
    # Kernels before 5.6: no openat2. Open, then check the path was canonical.
    try:
        fd = os.open(path, flags, dir_fd=None if dir_fd == AT_FDCWD else dir_fd)
    except OSError as e:
        raise SetupError(f"cannot open {path} to mount on it: {e.strerror}") from e
    expected = path if dir_fd == AT_FDCWD else os.path.join(os.readlink(fd_path(dir_fd)), path)
    if os.path.realpath(fd_path(fd)) != expected:
        os.close(fd)
        raise SetupError(f"refusing to mount on {path}: a symlink lies on the way")
    return fd


def set_readonly(fd: int, readonly: bool, recursive: bool, how: str) -> None:
    """Make the mount `fd` is the root of read-only (or writable again, not recursively)."""
    if how == "setattr":
        attr = _MountAttr(
            MOUNT_ATTR_RDONLY if readonly else 0, 0 if readonly else MOUNT_ATTR_RDONLY
        )
        flags = AT_EMPTY_PATH | (AT_RECURSIVE if recursive else 0)
        rc = _libc.syscall(
            ctypes.c_long(SYS_MOUNT_SETATTR),
            ctypes.c_long(fd),
            ctypes.c_char_p(b""),
            ctypes.c_long(flags),
            ctypes.byref(attr),
            ctypes.c_size_t(ctypes.sizeof(attr)),
        )
        if rc != 0:
            err = ctypes.get_errno()
            raise SetupError(f"mount_setattr on {os.readlink(fd_path(fd))}: {os.strerror(err)}")
        return
    if recursive:
        raise SetupError("recursive read-only remounts need mount_setattr")
    remount(fd_path(fd), readonly)


def remount(target: str, readonly: bool) -> None:
    """Bind-remount `target` (read-only or not), keeping the flags it came with (nosuid, nodev,
    noexec, atime): in a user namespace, dropping one of those is refused."""
    kept = os.statvfs(target).f_flag & MOUNT_FLAGS_KEPT
    flags = MS_BIND | MS_REMOUNT | (MS_RDONLY if readonly else 0) | kept
    mount("none", target, None, flags, None)


def _mountinfo_points() -> list[str]:
    return [point for point, _, _ in mountinfo()]


def _within(path: str, other: str) -> bool:
    return path == other or path.startswith(other.rstrip("/") + "/")


def detach_foreign_caps(caps: dict[str, str], exposed: list[str]) -> None:
    """Step 1b: detach the capped folders (`capped.py`) of other sandboxes' roots, such as
    another run's workspace, from this namespace: the tree has no business there, and a
    copy held here would keep that filesystem (and its disk) alive after its owner released
    it. One holding or inside an exposed path stays."""
    for point, fstype, source in mountinfo():
        if any(_within(path, point) or _within(point, path) for path in exposed):
            continue
        if fstype == "tmpfs":
            ours = source == caps["tmpfs_source"]
        elif fstype == "ext4" and source.startswith("/dev/loop"):
            name = os.path.basename(source)
            try:
                with open(f"/sys/block/{name}/loop/backing_file") as f:
                    backing = f.read().strip().removesuffix(" (deleted)")
            except OSError:
                continue
            ours = backing.endswith(caps["image_suffix"])
        else:
            continue
        if ours and _libc.umount2(point.encode(), MNT_DETACH) != 0:
            err = ctypes.get_errno()
            # EINVAL: gone already (under another one detached); ENOENT: gone with its folder
            # (its owner released it and removed the folder since the table was read: a
            # folder removed on the host takes its mounts in other namespaces with it);
            # EPERM/EACCES: locked in a user namespace (an unprivileged caller beside a root's
            # run): it stays, hidden by the allow-list's covers, only not released until this
            # tree ends.
            if err not in (errno.EINVAL, errno.ENOENT, errno.EPERM, errno.EACCES):
                raise SetupError(f"cannot detach {point}: {os.strerror(err)}")


def detach_covered(covered: list[str], exposed: list[str]) -> None:
    """Step 1c: detach the mounts that lie inside a folder this tree will see covered (outside
    the allow-list, hidden, a private place), unless they hold or lie in an exposed path: a
    cover hides their files, and without them /proc/self/mountinfo does not name them either
    (a second disk under /srv/banks/...). Best effort: a mount that cannot be detached (one
    locked in a user namespace, a namespace file) stays, covered all the same: only its name
    shows."""
    for point, _, _ in reversed(mountinfo()):
        if not any(_within(point, c) and point != c for c in covered):
            continue
        if any(_within(path, point) or _within(point, path) for path in exposed):
            continue
        _libc.umount2(point.encode(), MNT_DETACH)


def make_host_readonly(how: str) -> None:
    """Step 2: every mount of the namespace read-only, recursively."""
    if how == "setattr":
        fd = os.open("/", os.O_PATH | os.O_CLOEXEC)
        try:
            set_readonly(fd, readonly=True, recursive=True, how=how)
        finally:
            os.close(fd)
        return
    for point in _mountinfo_points():
        try:
            remount(point, readonly=True)
        except FileNotFoundError:
            continue
        except SetupError as e:  # a mount point covered by another one is not reachable
            if os.path.ismount(point):
                raise SetupError(f"cannot make the host read-only at {point}: {e}") from e


def mount_proc(how: str) -> None:
    """Step 3: /proc of the tree's own PID namespace; /proc/sys read-only on top of it."""
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
    mount("/proc/sys", "/proc/sys", None, MS_BIND | MS_REC, None)
    fd = open_target("/proc/sys")
    try:
        if how == "setattr":
            set_readonly(fd, readonly=True, recursive=True, how=how)
        else:
            remount(fd_path(fd), readonly=True)
    finally:
        os.close(fd)


def make_mountpoint(path: str, is_dir: bool) -> None:
    """Create `path` (and parents) inside a writable tmpfs so something can be mounted on it."""
    if os.path.lexists(path):
        return
    try:
        os.makedirs(os.path.dirname(path) or "/", mode=0o755, exist_ok=True)
        if is_dir:
            os.mkdir(path, 0o755)
        else:
            with open(path, "w"):
                pass
    except OSError as e:
        raise SetupError(f"cannot make a mount point at {path}: {e.strerror}") from e


def stage_places(
    places: list[list[Any]],
    inner: list[list[Any]],
    options: str,
    root_layer: os.stat_result | None = None,
    neutral: list[list[str]] | tuple[()] = (),
) -> tuple[list[int], list[int], list[int]]:
    """Step 4, first half: the one tmpfs of the private places, mounted over the first place
    (each place's own folder is bound over it later), with a folder per place; with
    `root_layer` (the stat of an ephemeral root), also the overlay's upper and work folders,
    the upper one with the root's owner and mode (the overlay's top folder takes them).

    With `neutral` ((path, text) pairs), also a read-only file holding each text, beside the
    place folders (so no place shows it), to be bound over its path (`neutral_views`).

    Returns an O_PATH descriptor per place folder, in the order of `places`, those of the
    upper and work folders (none without `root_layer`), and those of the neutral files.
    """
    if not places:
        if root_layer is not None:
            raise SetupError("an ephemeral root needs a private place (/tmp) for its writes")
        return [], [], []
    staging = open_target(places[0][0])
    try:
        mount("tmpfs", fd_path(staging), "tmpfs", MS_NOSUID | MS_NODEV, f"mode=0755,{options}")
    finally:
        os.close(staging)
    base = os.open(places[0][0], os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW)
    folders: list[int] = []
    layers: list[int] = []
    files: list[int] = []
    try:
        for index, (_, mode) in enumerate(places):
            os.mkdir(str(index), dir_fd=base)
            os.chmod(str(index), mode, dir_fd=base)
        for index, relative, mode in inner:
            path = os.path.join(str(index), relative)
            os.makedirs(os.path.join(fd_path(base), path), exist_ok=True)
            os.chmod(path, mode, dir_fd=base)
        for index in range(len(places)):
            folders.append(os.open(str(index), os.O_PATH | os.O_CLOEXEC, dir_fd=base))
        if root_layer is not None:
            for name in ("root-upper", "root-work"):
                os.mkdir(name, 0o700, dir_fd=base)
                layers.append(os.open(name, os.O_PATH | os.O_CLOEXEC, dir_fd=base))
            os.chown("root-upper", root_layer.st_uid, root_layer.st_gid, dir_fd=base)
            os.chmod("root-upper", stat.S_IMODE(root_layer.st_mode), dir_fd=base)
        for index, (_, text) in enumerate(neutral):
            name = f"neutral-{index}"
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
            fd = os.open(name, flags, 0o444, dir_fd=base)
            try:
                os.write(fd, text.encode())
            finally:
                os.close(fd)
            files.append(os.open(name, os.O_PATH | os.O_CLOEXEC, dir_fd=base))
    except OSError as e:
        raise SetupError(f"cannot prepare the private places: {e}") from e
    finally:
        os.close(base)
    return folders, layers, files


def overlay_root(source_fd: int, layers: list[int], path: str, options: str) -> None:
    """Step 5 for an ephemeral root: the root folder (`source_fd`, read-only underneath) with
    the places' upper and work folders on top, at `path`."""
    make_mountpoint(path, True)
    upper, work = (fd_path(fd) for fd in layers)
    data = f"lowerdir={fd_path(source_fd)},upperdir={upper},workdir={work}{options}"
    target = open_target(path)
    try:
        mount("overlay", fd_path(target), "overlay", MS_NOSUID | MS_NODEV, data)
    finally:
        os.close(target)


def check_pinned(source_fd: int, root: str, path: str, dev: int, ino: int) -> None:
    """A hidden path inside an ephemeral root is still the file the host meant, in the root
    folder itself (`source_fd`): the overlay on top reports inode numbers of its own."""
    relative = os.path.relpath(path, root)
    try:
        fd = open_target(relative, dir_fd=source_fd)
    except SetupError as e:
        if not os.path.lexists(os.path.join(fd_path(source_fd), relative)):
            raise RootAltered(f"hidden path {path} is gone from the sandbox root") from None
        raise RootAltered(f"hidden path {path} was replaced inside the sandbox root: {e}") from None
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
    if (st.st_dev, st.st_ino) != (dev, ino):
        raise RootAltered(f"hidden path {path} was replaced inside the sandbox root")


def bind(source_fd: int, path: str, readonly: bool | None, how: str) -> None:
    """Bind the tree `source_fd` refers to at `path`: writable, read-only, or (None) as the
    source is."""
    make_mountpoint(path, stat.S_ISDIR(os.fstat(source_fd).st_mode))
    target = open_target(path)
    try:
        mount(fd_path(source_fd), fd_path(target), None, MS_BIND | MS_REC, None)
    finally:
        os.close(target)
    if readonly is None:
        return
    top = open_target(path)  # now the new mount
    try:
        # The source came from a read-only host: clear that on the root (its own mount only,
        # not mounts below it), make a read-only path read-only all the way down.
        set_readonly(top, readonly, recursive=readonly and how == "setattr", how=how)
    finally:
        os.close(top)


def hide(path: str, dev: int, ino: int) -> None:
    """An empty read-only tmpfs over a folder, /dev/null over anything else."""
    try:
        target = open_target(path)
    except SetupError as e:
        if not os.path.lexists(path):
            if dev >= 0:  # it lay in the writable root, so it was moved, not merely removed
                raise RootAltered(f"hidden path {path} is gone from the sandbox root") from None
            return  # already invisible (under a private place or a cover)
        if dev >= 0:  # in the writable root: made a link (or put under one) by its users
            raise RootAltered(
                f"hidden path {path} was replaced inside the sandbox root: {e}"
            ) from None
        raise
    try:
        st = os.fstat(target)
        if dev >= 0 and (st.st_dev, st.st_ino) != (dev, ino):
            raise RootAltered(f"hidden path {path} was replaced inside the sandbox root")
        if stat.S_ISDIR(st.st_mode):
            flags = MS_RDONLY | MS_NOSUID | MS_NODEV
            mount("tmpfs", fd_path(target), "tmpfs", flags, HIDE_OPTIONS)
        else:
            mount("/dev/null", fd_path(target), None, MS_BIND, None)
            top = open_target(path)
            try:
                remount(fd_path(top), readonly=True)
            finally:
                os.close(top)
    finally:
        os.close(target)


def joined_hierarchies(joined: tuple[str, ...] | list[str]) -> list[tuple[str, str, str]]:
    """(mount point, filesystem type, mount options) of each cgroup hierarchy that holds one
    of the `joined` cgroup.procs files, read before anything is mounted over them."""
    with open("/proc/self/mountinfo", "rb") as f:
        lines = f.read().decode(errors="replace").splitlines()
    found = []
    for line in lines:
        fields = line.split(" ")
        after = fields.index("-")
        point, fstype = fields[4], fields[after + 1]
        if fstype not in ("cgroup", "cgroup2") or "\\" in point:
            continue
        if any(_within(path, point) for path in joined):
            options = [o for o in fields[after + 3].split(",") if o not in ("rw", "ro")]
            found.append((point, fstype, ",".join(options) if fstype == "cgroup" else ""))
    return found


def cgroup_view(hierarchies: list[tuple[str, str, str]], own_namespace: bool, how: str) -> None:
    """Step 6: /sys/fs/cgroup holds only the tree's own cgroups. An empty tmpfs over it, and
    in it each joined hierarchy, mounted afresh in the tree's cgroup namespace (its root is
    the tree's own cgroup), read-only. Without a cgroup namespace, or where the kernel refuses
    a fresh mount (a v1 hierarchy in a user namespace), that hierarchy's folder stays empty."""
    if not os.path.isdir(CGROUP_VIEW):
        return
    target = open_target(CGROUP_VIEW)
    try:
        mount("tmpfs", fd_path(target), "tmpfs", MS_NOSUID | MS_NODEV, COVER_OPTIONS)
    finally:
        os.close(target)
    cover = open_target(CGROUP_VIEW)  # the tmpfs: read-only once its folders are made
    try:
        for point, fstype, options in hierarchies if own_namespace else []:
            name = os.path.relpath(point, CGROUP_VIEW)
            name = os.path.basename(point) if name.startswith("..") else name
            path = CGROUP_VIEW if name == "." else os.path.join(CGROUP_VIEW, name)
            make_mountpoint(path, True)
            try:
                mount(fstype, path, fstype, VIEW_FLAGS, options or None)
            except SetupError:
                continue  # its folder stays empty: nothing of it is seen, its own counters neither
        set_readonly(cover, readonly=True, recursive=False, how=how)
    finally:
        os.close(cover)


def build(
    plan: dict[str, Any], joined: tuple[str, ...] | list[str] = (), cgroupns: bool = False
) -> None:
    """Carry out the host's plan (see the module docstring); raises SetupError. `joined`: the
    cgroup.procs files the tree joined; `cgroupns`: it is in a cgroup namespace of its own."""
    how = plan["host_readonly"]
    hierarchies = joined_hierarchies(joined) if plan.get("cgroup_view") else []
    sources: dict[str, int] = {}
    for kind, path in plan["steps"]:
        if kind in ("bind", "bind-ro"):
            sources[path] = open_target(path)  # canonical: a symlink here was planted
    detach_foreign_caps(plan["caps"], list(sources))
    covered = [path for kind, path in plan["steps"] if kind == "cover"]
    covered += [place for place, _ in plan["places"]] + [path for path, _, _ in plan["hide"]]
    covered += [CGROUP_VIEW] if plan.get("cgroup_view") else []  # the host's hierarchies
    detach_covered(covered, list(sources))
    ephemeral = plan["ephemeral"]  # the root's path when it is overlaid, else None
    make_host_readonly(how)
    mount_proc(how)
    root_layer = os.fstat(sources[ephemeral]) if ephemeral else None
    neutral = plan.get("neutral", [])
    folders, layers, files = stage_places(
        plan["places"], plan["place_dirs"], plan["place_options"], root_layer, neutral
    )
    place_folder = {place[0]: fd for place, fd in zip(plan["places"], folders, strict=True)}
    hidden = []
    for path, dev, ino in plan["hide"]:
        if ephemeral and dev >= 0:  # inside the root: checked in the folder, then covered
            check_pinned(sources[ephemeral], ephemeral, path, dev, ino)
            dev = ino = -1
        hidden.append((path, dev, ino))
    covers: list[int] = []
    for kind, path in plan["steps"]:
        if kind == "place":
            bind(place_folder[path], path, readonly=None, how=how)  # the tmpfs is writable
        elif path == ephemeral:
            overlay_root(sources[path], layers, path, plan["overlay_options"])
        elif kind == "cover":
            if not os.path.isdir(path):
                continue  # under a place or another cover: already empty
            target = open_target(path)
            try:
                mount("tmpfs", fd_path(target), "tmpfs", MS_NOSUID | MS_NODEV, COVER_OPTIONS)
            finally:
                os.close(target)
            covers.append(open_target(path))
        else:
            bind(sources[path], path, readonly=kind == "bind-ro", how=how)
    if plan.get("cgroup_view"):
        cgroup_view(hierarchies, cgroupns, how)
    for path, dev, ino in hidden:
        hide(path, dev, ino)
    for (path, _), fd in zip(neutral, files, strict=False):  # none without private places
        if os.path.isfile(path):  # the kernel's view as a file of fixed text (`neutral_views`)
            bind(fd, path, readonly=True, how=how)
    for fd in covers:
        set_readonly(fd, readonly=True, recursive=False, how=how)
    for fd in [*sources.values(), *folders, *layers, *covers, *files]:
        os.close(fd)
    if plan["mqueue"] and os.path.isdir("/dev/mqueue"):
        # POSIX message queues of the tree's own IPC namespace (the host's are out of reach).
        mount("mqueue", "/dev/mqueue", "mqueue", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
