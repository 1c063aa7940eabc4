"""What a local sandbox's filesystem looks like: the plan the launcher's `mounts` carries out.

Pure functions over host paths, so the rules can be read (and tested) in one place:

- the host is read-only everywhere, and only an allow-list of it is seen at all: the system
  folders (`SYSTEM_FOLDERS`) and the private places; every other entry of `/` (and of a folder
  such as /var that holds a private place) is covered by an empty tmpfs, a file by /dev/null
  (`outside_allowlist`), so a bank or an exam kept anywhere else (/opt, /srv, /data, /mnt,
  /var/lib, a home, a second disk) is invisible with no configuration;
- each private writable place (`PRIVATE_PLACES` that exist here, symlinks resolved, nested ones
  such as /run/lock recreated inside their parent) is a folder of one capped tmpfs per tree;
- the root is bound read-write and the read-only paths read-only, at their host paths (an
  ephemeral root is an overlay instead: the root folder below, its writes in the places' tmpfs);
- a folder that must not be seen but holds an exposed path (a folder outside the allow-list,
  a hidden folder, the caller's home, a folder the sandbox user cannot traverse) is covered by
  an empty tmpfs and only the exposed paths are bound on top ("covers");
- every other hidden path gets an empty read-only cover of its own.

Mounts happen outer path first, so a path inside another one is mounted after it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PRIVATE_PLACES = ("/tmp", "/var/tmp", "/dev/shm", "/run", "/run/lock", "/var/lock")
"""Where processes normally write: each is private to a tree (where it exists on the host)."""
SYSTEM_FOLDERS = (
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/dev", "/proc", "/sys"
)  # fmt: skip
"""The host folders every local sandbox sees (read-only): programs, libraries (CUDA under
/usr/local, the NVIDIA driver's under /usr/lib), configuration, devices and the kernel's
views. With the private places, the whole of the host a sandbox sees beyond its own paths."""
NAME_SERVICE_FILES = ("/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf")
"""Read to resolve names; where one links into a private place (systemd-resolved's stub in
/run), a sandbox with network gets the real file read-only there."""


def is_within(path: Path, other: Path) -> bool:
    """`path` is `other` or lies inside it."""
    return path == other or other in path.parents


def untraversable_ancestor(path: Path, uid: int) -> Path | None:
    """The highest ancestor of `path` that `uid` (not its owner, not in its group) cannot enter."""
    for ancestor in reversed(path.parents):
        if ancestor == Path("/"):
            continue
        try:
            st = ancestor.stat()
        except OSError:
            return None
        if st.st_uid != uid and not st.st_mode & stat.S_IXOTH:
            return ancestor
    return None


@dataclass(frozen=True)
class Places:
    """The private writable places: top-level folders, and folders to recreate inside them."""

    top: list[tuple[Path, int]]
    """(path, mode) of each place that is not inside another one."""
    inner: list[tuple[int, str, int]]
    """(index into `top`, path relative to it, mode), e.g. /run/lock inside /run."""

    def holds(self, path: Path) -> bool:
        return any(is_within(path, place) for place, _ in self.top)


def private_places(candidates: Sequence[str] = PRIVATE_PLACES) -> Places:
    """The places of `candidates` that exist on this host, symlinks resolved, de-duplicated."""
    found = sorted({Path(os.path.realpath(p)) for p in candidates if os.path.isdir(p)})
    top = [p for p in found if not any(q != p and is_within(p, q) for q in found)]
    inner: list[tuple[int, str, int]] = []
    for path in found:
        if path in top:
            continue
        index = next(i for i, q in enumerate(top) if is_within(path, q))
        inner.append((index, str(path.relative_to(top[index])), _mode(path)))
    return Places([(p, _mode(p)) for p in top], inner)


def outside_allowlist(
    places: Places, allowed: Sequence[str] = SYSTEM_FOLDERS, top: Path = Path("/")
) -> tuple[list[Path], list[Path]]:
    """What of the host lies outside the allow-list: (folders to cover, other files to hide).

    Each entry of `top` that is neither an allowed folder, nor a private place, nor a symlink
    (it leads into a place that is allowed or covered itself); a folder holding a private place
    (/var with /var/tmp) is not covered whole but entry by entry, the same way. Mount points
    below a covered folder (a second disk under /mnt or /srv) vanish with it.
    """
    folders: list[Path] = []
    files: list[Path] = []
    keep = {Path(a) for a in allowed}
    try:
        entries = sorted(top.iterdir())
    except OSError:
        return folders, files
    for entry in entries:
        if entry in keep or entry.is_symlink() or places.holds(entry):
            continue
        if any(is_within(place, entry) for place, _ in places.top):
            inner_folders, inner_files = outside_allowlist(places, allowed, entry)
            folders += inner_folders
            files += inner_files
        elif entry.is_dir():
            folders.append(entry)
        elif entry.exists():
            files.append(entry)
    return folders, files


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def runtime_paths(
    prefixes: Sequence[Path],
    *,
    hide: Sequence[Path],
    readonly: Sequence[Path],
    unseen: Sequence[Path],
    uid: int | None,
) -> list[Path]:
    """The interpreter's prefixes to bind read-only because the sandbox would not see them.

    The local backend has no image: sandboxed code runs the host's Python (its venv and base
    installation). Where that lies under a folder the sandbox does not see (`unseen`: the
    private places and the covered home; a hidden folder; for the sandbox user `uid`, a folder
    it cannot traverse, such as pyenv under /root), it is shown again, read-only and alone.
    A caller that hides a prefix itself (or something inside it) wants no Python: then none is.
    """
    if any(is_within(h, p) for h in hide for p in prefixes):
        return []
    found: list[Path] = []
    for prefix in sorted(set(prefixes)):
        if any(is_within(prefix, p) for p in [*readonly, *found]):
            continue
        hidden = any(is_within(prefix, d) for d in [*unseen, *hide]) or (
            uid is not None and untraversable_ancestor(prefix, uid) is not None
        )
        if hidden:
            found.append(prefix)
    return found


def network_files(places: Places) -> list[Path]:
    """Name-service files that link into a private place: their real files, to show read-only."""
    found = []
    for name in NAME_SERVICE_FILES:
        real = Path(os.path.realpath(name))
        if real != Path(name) and places.holds(real) and real.is_file():
            found.append(real)
    return found


def _depth(path: Path) -> int:
    return len(path.parts)


@dataclass(frozen=True)
class Layout:
    """The filesystem of a sandbox, as a plan for `mounts.build`."""

    steps: list[tuple[str, Path]]
    """("place" | "cover" | "bind" | "bind-ro", path), outer paths first."""
    hide: list[tuple[Path, int, int]]
    """Hidden paths with (device, inode) where they lie in the writable root, else (-1, -1)."""
    covers_home: bool

    def plan(
        self,
        places: Places,
        place_options: str,
        host_readonly: str,
        *,
        ephemeral: Path | None = None,
        overlay_options: str = "",
    ) -> dict[str, Any]:
        """The marshal-able plan the launcher executes. `ephemeral`: the root, when it is to be
        an overlay whose writes go to the places' tmpfs (`overlay_options` added to its own)."""
        return {
            "ephemeral": str(ephemeral) if ephemeral is not None else None,
            "overlay_options": overlay_options,
            "host_readonly": host_readonly,
            "places": [[str(p), mode] for p, mode in places.top],
            "place_dirs": [list(entry) for entry in places.inner],
            "place_options": place_options,
            "steps": [[kind, str(path)] for kind, path in self.steps],
            "hide": [[str(p), dev, ino] for p, dev, ino in self.hide],
            "mqueue": True,
        }


def layout(
    root: Path,
    *,
    readonly: Sequence[Path],
    hide: Sequence[Path],
    places: Places,
    home: Path | None,
    uid: int | None,
    outside: Sequence[Path] = (),
) -> Layout:
    """Where each path goes. `uid`: the sandbox user when commands switch to it (root hosts),
    so folders it cannot traverse are covered; None without a switch. `outside`: the folders
    outside the allow-list (`outside_allowlist`), covered unless exposed themselves. All paths
    canonical."""
    exposed = [root, *readonly]

    def seen(path: Path) -> bool:  # visible unless a place or a cover hides it
        return not places.holds(path) or any(is_within(path, e) for e in exposed)

    covers: set[Path] = set()
    home_seen = home is not None and home != Path("/") and home.is_dir() and seen(home)
    if home is not None and home_seen and not any(is_within(home, e) for e in exposed):
        covers.add(home)
    for path in exposed:
        if uid is not None and (ancestor := untraversable_ancestor(path, uid)) is not None:
            covers.add(ancestor)
        covers.update(h for h in hide if h != path and is_within(path, h))
    covers.update(c for c in outside if not any(is_within(c, e) for e in exposed))
    covers = {c for c in covers if seen(c)}
    steps: list[tuple[str, Path]] = [("place", p) for p, _ in places.top]
    steps += [("cover", c) for c in covers]
    steps += [("bind", root)] + [("bind-ro", p) for p in readonly]
    steps.sort(key=lambda step: (_depth(step[1]), str(step[1])))
    hidden: list[tuple[Path, int, int]] = []
    for path in sorted(set(hide) - covers):
        exposed_part = any(is_within(path, e) for e in exposed)
        if not exposed_part and (places.holds(path) or any(is_within(path, c) for c in covers)):
            continue  # under a private place or a cover: nothing of it is visible anyway
        dev = ino = -1
        if is_within(path, root):  # the sandbox may move things in its root: pin this one
            try:
                st = path.lstat()
                dev, ino = st.st_dev, st.st_ino
            except OSError:
                pass  # not there yet: hidden wherever it appears
        hidden.append((path, dev, ino))
    covers_home = home is not None and any(is_within(home, c) for c in covers)
    return Layout(steps, hidden, covers_home=covers_home)
