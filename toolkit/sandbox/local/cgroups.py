"""Where the local backend makes its sandboxes' cgroups on a cgroup-v2 host: the layouts.

A v2 cgroup hands a controller to its children only if its parent handed it down (its
`cgroup.controllers`) and it enabled it (`cgroup.subtree_control`); and a cgroup that holds
processes cannot enable any (the "no internal processes" rule; the hierarchy's root is exempt).
Every sandboxed tree needs memory, pids and cpu. The layouts, tried in this order
(`find_layout`; `<own>` is this process's cgroup, from the `0::` line of /proc/self/cgroup):

1. `delegated`: `<own>` offers all three and was given to us (`_given`): a user may write it
   (the kernel's delegation), or, for root (who may write anything), systemd marked it
   delegated (`systemd-run --scope -p Delegate=yes`, a `Delegate=yes` unit), it is the top of
   the tree this process sees (a container's own cgroup), or an earlier toolkit arranged it.
   Writes: mkdir `<own>/ari-harness` and `<own>/ari-sandboxes`; the processes found in
   `<own>` move to `<own>/ari-harness` (no internal processes); `+memory +pids +cpu` into the
   `cgroup.subtree_control` of `<own>` and of `<own>/ari-sandboxes`. Trees go in
   `<own>/ari-sandboxes/ari-sandbox-*`.
2. `top`: `<own>` cannot give all three (its parent does not pass them down: a container, a VM
   without systemd, a login session), but an ancestor `<top>` offers them and is ours to write:
   the hierarchy's root as root, or the highest ancestor a user may write (delegated to
   them), tried from the root down. The toolkit makes a cgroup
   of its own there, as container engines' cgroupfs drivers do. Writes: `+name` into
   `<top>/cgroup.subtree_control` for each of the three not enabled there yet (only added,
   never removed, and nothing when all are on); mkdir `<top>/ari-bench` and `+memory +pids
   +cpu` into its `cgroup.subtree_control`. Trees go in `<top>/ari-bench/ari-sandbox-*`; only a
   tree's own first process moves there (the launcher writes its pid), this process and the
   rest of `<own>` stay where they are. `ari-bench` holds no process itself, and is removed
   when its last tree's cgroup is (the kernel refuses rmdir while it has children, so a
   concurrent toolkit's trees keep it; one that finds it gone makes it again).
3. `partial`: as `delegated`, with the controllers `<own>` does offer (recorded as such).
4. `none`: no limits by cgroup (the sandbox records what it lacks).

No other cgroup is written: not `<own>` in layout 2, not any ancestor but the one
`cgroup.subtree_control` line of `<top>`, not any cgroup's `cgroup.procs` but of the ones made
here. An ancestor that fails as `<top>` keeps no `ari-bench` (removed again); of a refused
`+name` line, the controllers the kernel did accept one by one stay added.
`site/docs/maintainers/sandboxes.md` ("cgroups on a GPU server") has the same list.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
SELF_CGROUP = Path("/proc/self/cgroup")
V1_CONTROLLERS = ("memory", "pids", "cpu")
WANTED = ("memory", "pids", "cpu")
"""The cgroup-v2 controllers every sandboxed tree needs (a memory, a process and a CPU cap)."""
HARNESS_LEAF = "ari-harness"
SANDBOXES = "ari-sandboxes"
TOP = "ari-bench"
"""The toolkit's own cgroup at the top of the tree (layout `top`)."""
V2_KINDS = ("delegated", "top", "partial")
SYSTEMD = Path("/run/systemd/system")
"""Exists where systemd is the init system."""


@dataclass(frozen=True)
class CgroupLayout:
    """Where this process makes its trees' cgroups, and why there (or why nowhere)."""

    kind: str
    """"delegated", "top", "partial", "v1" or "none" (see the module's docstring)."""
    why: str
    """One line: why this layout (what `<own>` lacks), or why none works."""
    pids: Path | None = None
    """The directory each tree's pids cgroup is made in (None: no process cap by cgroup)."""
    memory: Path | None = None
    cpu: Path | None = None
    own: Path | None = None
    """This process's own cgroup (v2)."""
    wanted: tuple[str, ...] = WANTED
    """The controllers the layout turns on for each tree (WANTED; a test on a kernel that has
    none of them names another)."""

    @property
    def cgroup2(self) -> bool:
        """One v2 cgroup per tree (layouts delegated, top, partial)."""
        return self.kind in V2_KINDS

    @property
    def controllers(self) -> list[str]:
        found = {"pids": self.pids, "memory": self.memory, "cpu": self.cpu}
        return [c for c in WANTED if found[c] is not None]

    def describe(self) -> str:
        """One line for people: the layout, where, and why."""
        where = self.memory or self.pids or self.cpu
        have = " ".join(self.controllers)
        if self.kind == "delegated":
            return f"v2, delegated subtree {where} ({have})"
        if self.kind == "top":
            return f"v2, own top-level cgroup {where} ({have}), because {self.why}"
        if self.kind == "partial":
            return f"v2, delegated subtree {where} with {have} only: {self.why}"
        if self.kind == "v1":
            return f"v1 ({have} hierarchies writable)"
        return f"none: {self.why}"


def is_cgroup2(root: Path = CGROUP_ROOT) -> bool:
    """A pure cgroup-v2 host: the unified tree at `root`, no v1 controller hierarchies."""
    unified = (root / "cgroup.controllers").is_file()
    return unified and not any((root / c).is_dir() for c in V1_CONTROLLERS)


def own_cgroup2(root: Path, self_cgroup: Path) -> Path | None:
    """This process's v2 cgroup (`0::` line), or the one above it when it is already a harness
    leaf (a process the harness started); None where it is not in the tree at `root`."""
    try:
        lines = self_cgroup.read_text().splitlines()
    except OSError:
        return None
    own = next((line[3:] for line in lines if line.startswith("0::")), None)
    if own is None:
        return None
    here = root / own.strip().lstrip("/")
    if here.name == HARNESS_LEAF and here != root:
        here = here.parent
    return here if here.is_dir() else None


def _words(file: Path) -> set[str]:
    try:
        return set(file.read_text().split())
    except OSError:
        return set()


def _enable(directory: Path, wanted: list[str]) -> set[str]:
    """Enable the controllers of `wanted` for `directory`'s children (all in one write, else
    one by one: the kernel refuses a whole write for one controller); those now enabled."""
    control = directory / "cgroup.subtree_control"
    try:
        control.write_text(" ".join(f"+{name}" for name in wanted))
    except OSError:
        for name in wanted:
            with contextlib.suppress(OSError):
                control.write_text(f"+{name}")
    return {word.lstrip("+") for word in _words(control)} & set(wanted)


def _leave_for_leaf(here: Path) -> None:
    """Move the processes in `here` to its leaf `ari-harness` (the no-internal-processes
    rule); ones that cannot move (kernel threads, ones gone meanwhile) are left."""
    try:
        members = (here / "cgroup.procs").read_text().split()
    except OSError:
        return
    if not members or not (here / "cgroup.events").exists():
        return  # the true root cgroup (no cgroup.events) may hold processes and delegate
    leaf = here / HARNESS_LEAF
    with contextlib.suppress(FileExistsError):
        leaf.mkdir()
    for pid in members:
        with contextlib.suppress(OSError):
            (leaf / "cgroup.procs").write_text(pid)


def _given(own: Path, root: Path, is_root: bool, systemd: Path = SYSTEMD) -> bool:
    """Whether `<own>` is ours to arrange (move its processes, enable its controllers).

    A user's writes are checked by the kernel (what it lets a user write was delegated), so
    for a user: yes, and the writes tell. Root may write any cgroup, so for root only one that
    was handed over: the top of the tree it sees (a container's own cgroup), one systemd
    marked delegated (the `trusted.delegate` attribute, systemd 251+; else `systemctl show`),
    or one a toolkit arranged before (its `ari-harness` or `ari-sandboxes` is there). Without
    this, root in a cgroup whose parent just got the controllers (ours, from layout `top`)
    would next time move every process of that cgroup, strangers' too."""
    if not is_root or own == root:
        return True
    if (own / HARNESS_LEAF).is_dir() or (own / SANDBOXES).is_dir():
        return True
    for name in ("trusted.delegate", "user.delegate"):
        with contextlib.suppress(OSError):
            if os.getxattr(own, name) == b"1":
                return True
    systemctl = shutil.which("systemctl")
    if systemd.is_dir() and systemctl and own.name.endswith((".scope", ".service")):
        try:
            done = subprocess.run(
                [systemctl, "show", "-P", "Delegate", own.name],
                capture_output=True,
                text=True,
                timeout=10,
            )
        except (OSError, subprocess.TimeoutExpired):
            return False
        return done.stdout.strip() == "yes"
    return False


def _delegate(own: Path, wanted: list[str]) -> tuple[Path | None, set[str], str]:
    """Layout delegated (or partial): `<own>/ari-sandboxes` with the controllers of `wanted`
    it could enable, or (None, {}, why not)."""
    parent = own / SANDBOXES
    try:
        parent.mkdir(exist_ok=True)
    except OSError as exc:
        return None, set(), f"{own} is not ours to write ({exc.strerror})"
    _leave_for_leaf(own)
    if not _enable(own, wanted):
        return None, set(), f"{own}/cgroup.subtree_control refused {' '.join(wanted)}"
    enabled = _enable(parent, wanted)
    if not enabled:
        return None, set(), f"{parent}/cgroup.subtree_control refused {' '.join(wanted)}"
    return parent, enabled, ""


def ensure_top(top: Path, wanted: tuple[str, ...] = WANTED) -> None:
    """Make the toolkit's own top cgroup again if a concurrent toolkit removed it, with the
    controllers on for its children (the ancestor's were enabled by `find_layout`)."""
    with contextlib.suppress(FileExistsError):
        top.mkdir()
    _enable(top, list(wanted))


def drop_top(top: Path) -> bool:
    """Remove the toolkit's own top cgroup if it holds no tree's cgroup any more (the kernel
    refuses, EBUSY, while it has a child); whether it is gone."""
    try:
        top.rmdir()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def _make_top(ancestor: Path, wanted: tuple[str, ...]) -> tuple[Path | None, bool, str]:
    """Layout top at `ancestor`: (`<ancestor>/ari-bench` with all three controllers for its
    children, whether this call made it, "") or (None, False, why not). Leaves nothing it made
    behind when it fails."""
    missing = [c for c in wanted if c not in _words(ancestor / "cgroup.controllers")]
    if missing:
        return None, False, f"{ancestor} offers no {' '.join(sorted(missing))}"
    top = ancestor / TOP
    try:
        top.mkdir()
        made = True
    except FileExistsError:
        made = False
    except OSError as exc:
        return None, False, f"cannot make {top} ({exc.strerror})"
    off = [c for c in wanted if c not in _words(ancestor / "cgroup.subtree_control")]
    why = ""
    if off and set(off) - _enable(ancestor, off):
        why = f"{ancestor}/cgroup.subtree_control refused +{' +'.join(sorted(off))}"
        if (ancestor / "cgroup.events").exists():
            why += " (a cgroup with processes of its own cannot hand controllers down)"
    elif set(wanted) - _enable(top, list(wanted)):
        why = f"{top}/cgroup.subtree_control refused {' '.join(wanted)}"
    if why:
        if made:
            drop_top(top)
        return None, False, why
    return top, made, ""


def _ancestors(root: Path, own: Path) -> list[Path]:
    """The cgroups above `own`, the hierarchy's root first."""
    try:
        parts = own.relative_to(root).parts
    except ValueError:
        return []
    return [root.joinpath(*parts[:i]) for i in range(len(parts))]


def find_layout(
    root: Path = CGROUP_ROOT,
    self_cgroup: Path = SELF_CGROUP,
    wanted: tuple[str, ...] = WANTED,
    *,
    is_root: bool | None = None,
) -> CgroupLayout:
    """The first layout of the module's docstring that works on the v2 tree at `root`, for
    the controllers of `wanted` (`is_root`: this process's; None: ask the kernel)."""
    root_user = os.geteuid() == 0 if is_root is None else is_root
    own = own_cgroup2(root, self_cgroup)
    if own is None:
        return CgroupLayout("none", f"this process's cgroup is not in {root}")
    offered = [c for c in wanted if c in _words(own / "cgroup.controllers")]
    lacking = [c for c in wanted if c not in offered]
    parent: Path | None = None
    enabled: set[str] = set()
    own_problem = f"{own} gets no {' '.join(sorted(lacking))} from its parent"
    given = _given(own, root, root_user)
    if not lacking and not given:
        own_problem = f"{own} was not delegated (systemd's Delegate=yes marks it)"
    elif not lacking:
        parent, enabled, why = _delegate(own, offered)
        if parent is not None and enabled == set(wanted):
            return CgroupLayout("delegated", "", parent, parent, parent, own, wanted)
        own_problem = why or f"{own} could enable only {' '.join(sorted(enabled))}"
    tries = []
    for ancestor in _ancestors(root, own):
        top, made, why = _make_top(ancestor, wanted)
        if top is not None:
            if made:  # each tree makes it again (`ensure_top`): the probe leaves nothing
                drop_top(top)
            return CgroupLayout("top", own_problem, top, top, top, own, wanted)
        tries.append(why)
    if not tries:
        own_problem += "; no cgroup above it to use"
    for why in {tries[0]: 0, tries[-1]: 0} if tries else {}:  # the top's, and the nearest's
        own_problem += f"; {why}"
    if lacking and offered and given:
        parent, enabled, why = _delegate(own, offered)
        own_problem += f"; {why}" if why else ""
    if parent is not None and enabled:
        pids, memory, cpu = (parent if c in enabled else None for c in ("pids", "memory", "cpu"))
        return CgroupLayout("partial", own_problem, pids, memory, cpu, own, wanted)
    return CgroupLayout("none", own_problem, own=own, wanted=wanted)
