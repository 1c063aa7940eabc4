"""`toolkit doctor`: can this host run a track validly? One check per need, each with a fix.

The checks read the host (cgroups, namespaces, loop devices, the Docker engine and its GPU
support, the GPUs and their driver, torch's build, free disk, the opencode binary, and, when
asked, the provider's key through one tiny request) and compare it with what the track needs:
its isolation floor (`toolkit.host.floor`), its GPU model, its workspace size. A check that
fails and is *required* means a run here would not be valid under the track's rules:
`toolkit doctor` exits non-zero, and `toolkit run` (which runs the fast checks first) refuses
before any work.

Every probe is one function that takes where to look, so the tests can point it at a fake
cgroup tree or a fake `/proc/driver/nvidia`.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from toolkit.host.floor import HostIsolation, docker_isolation, local_isolation
from toolkit.paths import state_dir
from toolkit.sandbox.local.cgroups import TOP, CgroupLayout
from toolkit.tracks.model import FLOOR_WORDS, Track

CGROUP_ROOT = Path("/sys/fs/cgroup")
NVIDIA_PROC = Path("/proc/driver/nvidia")
APPARMOR_USERNS = Path("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
MAX_USERNS = Path("/proc/sys/user/max_user_namespaces")
WORK_ROOM_BYTES = 4 * 2**30
"""The least room a workspace must have beyond its copy of the training data (checkpoints,
bundles of at most the track's size limit, logs): a floor chosen for this check."""
CDI_DIRS = (Path("/etc/cdi"), Path("/var/run/cdi"))
SYSTEMD = Path("/run/systemd/system")
"""Exists where systemd is the init system (sd_booted's test)."""
FREE_SHARE = 0.5
"""A capped workspace takes at most this share of the free disk (`capped.FREE_SHARE`)."""


@dataclass(frozen=True)
class Check:
    """One line of the doctor's table."""

    name: str
    need: str
    """What the track needs ("" when the track does not care)."""
    here: str
    """What this host has."""
    ok: bool
    required: bool
    """A failure means runs of the track here would not be valid."""
    fix: str = ""


# -- host facts ---------------------------------------------------------------------------------


def cgroup_layout() -> CgroupLayout:
    """Where the local backend puts its trees' cgroups on this host, and why (its own probe:
    on a v2 host it may enable controllers and make cgroups, as `toolkit run` would)."""
    from toolkit.sandbox.local import host as local_host

    layout = local_host.probe().cgroups
    return layout if layout is not None else CgroupLayout("none", "not probed")


def systemd_running(marker: Path = SYSTEMD) -> bool:
    return marker.is_dir()


def cgroup_fix(layout: CgroupLayout, *, root: bool, systemd: bool, track: str) -> str:
    """One line that would give the local backend memory, pids and cpu here."""
    scope = f"systemd-run {'' if root else '--user '}--scope -p Delegate=yes"
    command = f"`{scope} -- toolkit run --track {track} ...` (a delegated scope)"
    why = layout.why
    if layout.kind == "v1" or (layout.kind == "none" and "v1" in why):
        if not root:
            return "run as root (cgroup v1 needs it), or use --backend docker"
        return "mount the cgroup-v1 pids and memory hierarchies read-write, or use --backend docker"
    if systemd:
        return (
            f"run it as {command}" + ("" if root else ", or as root") + ", or use --backend docker"
        )
    if not root:
        return (
            f"run as root (the toolkit then makes its own /sys/fs/cgroup/{TOP}), or from a "
            "cgroup delegated to your user with memory, pids and cpu, or use --backend docker"
        )
    if "Read-only" in why:
        return "mount /sys/fs/cgroup read-write (a container: a private, writable cgroup mount)"
    if "cannot hand controllers down" in why:
        return (
            "move the processes of the cgroup named above into a child cgroup of it (as a "
            "container's init would), or use --backend docker"
        )
    if "offers no" in why:
        return "boot a kernel with the memory, pids and cpu controllers on, or use --backend docker"
    return "fix what the cgroups row says, or use --backend docker"


def userns_state(
    max_userns: Path = MAX_USERNS, apparmor: Path = APPARMOR_USERNS
) -> tuple[bool, str]:
    """(unprivileged user namespaces allowed, a description)."""
    try:
        allowed = int(max_userns.read_text().strip()) > 0
    except (OSError, ValueError):
        allowed = False
    restricted = False
    with contextlib.suppress(OSError):
        restricted = apparmor.read_text().strip() == "1"
    if not allowed:
        return False, "disabled (user.max_user_namespaces = 0)"
    if restricted:
        return False, "restricted by AppArmor (apparmor_restrict_unprivileged_userns = 1)"
    return True, "allowed"


def gpu_names(proc: Path = NVIDIA_PROC) -> list[str]:
    """Model names of the NVIDIA GPUs the driver lists, in bus order."""
    names = []
    with contextlib.suppress(OSError):
        for entry in sorted((proc / "gpus").iterdir()):
            with contextlib.suppress(OSError):
                info = (entry / "information").read_text(errors="replace")
                found = re.search(r"^Model:\s*(.+)$", info, re.MULTILINE)
                names.append(found.group(1).strip() if found else "unknown NVIDIA GPU")
    return names


def driver_version(proc: Path = NVIDIA_PROC) -> str | None:
    with contextlib.suppress(OSError):
        text = (proc / "version").read_text(errors="replace")
        found = re.search(r"Kernel Module\s+(?:for \S+\s+)?([0-9][0-9.]+)", text)
        return found.group(1) if found else text.splitlines()[0].strip()
    return None


@dataclass(frozen=True)
class TorchBuild:
    version: str | None
    cuda: str | None
    """The CUDA version torch was built for; None: a CPU build."""
    cuda_works: bool
    devices: list[str]


def torch_build() -> TorchBuild:
    try:
        import torch
    except ImportError:
        return TorchBuild(None, None, False, [])
    cuda = torch.version.cuda
    works = bool(cuda) and torch.cuda.is_available()
    devices = (
        [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if works else []
    )
    return TorchBuild(torch.__version__, cuda, works, devices)


def docker_gpu_support() -> str | None:
    """ "nvidia runtime", "CDI" or None: how the engine can hand a container a GPU."""
    from toolkit.sandbox import SandboxError
    from toolkit.sandbox.docker import engine as docker_engine

    try:
        info = docker_engine.connect().info()
    except (SandboxError, OSError):
        return None
    if "nvidia" in (info.get("Runtimes") or {}):
        return "nvidia runtime"
    dirs = [Path(d) for d in info.get("CDISpecDirs") or []] or list(CDI_DIRS)
    for folder in dirs:
        with contextlib.suppress(OSError):
            for spec in folder.iterdir():
                with contextlib.suppress(OSError):
                    if "nvidia.com/gpu" in spec.read_text(errors="replace"):
                        return "CDI"
    return None


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


# -- the checks ---------------------------------------------------------------------------------


@dataclass
class Doctor:
    """The checks for one track and backend. The probes are attributes so tests can swap them."""

    track: Track
    backend: str
    cgroup: Callable[[], CgroupLayout] = cgroup_layout
    systemd: Callable[[], bool] = systemd_running
    is_root: Callable[[], bool] = lambda: os.geteuid() == 0
    workspace_kind: Callable[[int], str] = lambda cap: workspace_kind(cap)
    userns: Callable[[], tuple[bool, str]] = userns_state
    gpus: Callable[[], list[str]] = gpu_names
    driver: Callable[[], str | None] = driver_version
    torch: Callable[[], TorchBuild] = torch_build
    docker_gpus: Callable[[], str | None] = docker_gpu_support
    local: Callable[[], HostIsolation] = local_isolation
    docker: Callable[[str | None], HostIsolation] = docker_isolation

    @property
    def wants_gpu(self) -> bool:
        return self.track.gpu_model is not None

    def fast(self, *, required_only: bool = False) -> list[Check]:
        """Everything but the provider: what `toolkit run` checks before any work. With
        `required_only` (the run's pre-flight), what the track does not need is not looked at
        (torch is not imported for a track without a GPU)."""
        checks = [self._cgroups(), self._userns(), self._loop()]
        gpu_support = self.docker_gpus() if self.backend == "docker" else None
        checks += self._isolation(gpu_support)
        checks.append(self._neighbours())
        if self.wants_gpu or not required_only:
            checks += self._gpu_checks(gpu_support)
        checks.append(self._disk())
        return checks

    def _cgroup_fix(self) -> str:
        return cgroup_fix(
            self.cgroup(), root=self.is_root(), systemd=self.systemd(), track=self.track.id
        )

    def _cgroups(self) -> Check:
        layout = self.cgroup()
        needed = {"memory-per-tree", "processes-per-tree"} & set(self.track.isolation_floor)
        ok = layout.memory is not None and layout.pids is not None
        fix = "" if ok else self._cgroup_fix()
        if ok and layout.kind == "top" and self.systemd():
            fix = "works; under systemd a delegated scope is preferred: " + self._cgroup_fix()
        return Check(
            "cgroups",
            "per-tree memory and process caps" if needed else "",
            layout.describe(),
            ok,
            required=bool(needed) and self.backend == "local" and not ok,
            fix=fix,
        )

    def _userns(self) -> Check:
        allowed, text = self.userns()
        root = os.geteuid() == 0
        ok = allowed or root
        here = f"{text}{'; running as root (not needed)' if root else ''}"
        fix = "" if ok else "run as root, or allow unprivileged user namespaces (sysctl)"
        return Check("user namespaces", "", here, ok, required=False, fix=fix)

    def _loop(self) -> Check:
        from toolkit.sandbox import capped

        why = capped.unavailable("ext4")
        cap = self.track.workspace_disk_bytes
        need = f"a {_gib(cap)} workspace cap" if cap else ""
        return Check(
            "loop devices",
            need,
            "ext4 images can be mounted" if why is None else f"no: {why}",
            why is None,
            required=False,  # a tmpfs or an uncapped workspace is recorded, not refused
            fix="" if why is None else "run as root with /dev/loop-control and mkfs.ext4",
        )

    def _isolation(self, gpu_support: str | None) -> list[Check]:
        floor = list(self.track.isolation_floor)
        local, docker = self.local(), self.docker(gpu_support)
        mine = local if self.backend == "local" else docker
        other = docker if self.backend == "local" else local
        lacks = mine.lacks(floor, gpu=self.wants_gpu)
        need = ", ".join(floor) or "none (a demo track degrades and records what it lacked)"
        here = "all of it" if not lacks else "lacks " + ", ".join(lacks)
        if lacks and not mine.available:  # one reason for all of it: said once, not per word
            here = f"none of it: {mine.why_not}"
        fix = ""
        cgroup_words = {"memory-per-tree", "processes-per-tree"}
        if lacks and self.backend == "local" and set(lacks) <= cgroup_words:
            fix = self._cgroup_fix()  # the cgroups row says why; its fix is this one's
        elif lacks:
            fix = (
                f"use --backend {other.backend}, which has all of it here"
                if not other.lacks(floor, gpu=self.wants_gpu)
                else f"make the {self.backend} backend work here (above), or use another --backend"
                if not mine.available
                else "; ".join(f"{r}: {FLOOR_WORDS.get(r.split(' (')[0], r)}" for r in lacks)
            )
        return [
            Check(
                f"isolation ({self.backend})",
                need,
                here if floor else ("; ".join(self._described(mine)) or "none"),
                not lacks,
                required=bool(lacks),
                fix=fix,
            )
        ]

    def _neighbours(self) -> Check:
        """What runs at once on this host (a campaign's slots, its GPUs) see of each other."""
        from toolkit.sandbox import neighbours

        mine = self.local() if self.backend == "local" else self.docker(None)
        ok = mine.available and mine.namespaces
        shared = (
            "a file lock on a file both read, free memory, the task count and CPU timing "
            f"stay shared: up to {neighbours.MEASURED_BITS_PER_S:g} bit/s measured between "
            "two sandboxes at once (each channel: security/channels.md#runs-on-one-host), so "
            "an official track's hidden grading runs alone on its host and a campaign runs "
            "one of its runs at a time unless --accept-host-channel "
            f"{neighbours.MEASURED_BITS_PER_S:g}bit/s"
        )
        here = (
            f"each sandbox sees only its own cgroups, devices and processes, and (as root) "
            f"runs as a uid of its own; {shared}"
            if ok
            else f"no: a sandbox here would see the other runs' cgroups and devices; {shared}"
        )
        return Check(
            "runs on one host",
            "",
            here,
            ok,
            required=False,  # the isolation floor decides; this says what a campaign shares
            fix="" if ok else "one run per host at a time (--slots 1), or another --backend",
        )

    @staticmethod
    def _described(h: HostIsolation) -> list[str]:
        if not h.available:
            return [f"unavailable: {h.why_not}"]
        parts = {
            "namespaces": h.namespaces,
            "memory-per-tree": h.memory_per_tree,
            "processes-per-tree": h.processes_per_tree,
        }
        return [f"{k} {'yes' if v else 'no'}" for k, v in parts.items()]

    def _gpu_checks(self, gpu_support: str | None) -> list[Check]:
        names = self.gpus()
        model = self.track.gpu_model
        checks = []
        matching = [n for n in names if model and model.lower() in n.lower()]
        checks.append(
            Check(
                "GPUs",
                f"an NVIDIA {model} ({self.track.hardware})" if model else "",
                ", ".join(names) or "none visible (no NVIDIA driver)",
                bool(matching) if model else True,
                required=bool(model) and not matching,
                fix=f"run this track on a host with an {model}" if model and not matching else "",
            )
        )
        driver = self.driver()
        checks.append(
            Check(
                "NVIDIA driver",
                "loaded" if model else "",
                driver or "not loaded",
                driver is not None or not model,
                required=bool(model) and driver is None,
                fix="install the NVIDIA driver" if model and driver is None else "",
            )
        )
        build = self.torch()
        if build.version is None:
            here = "not installed"
        elif build.cuda is None:
            here = f"{build.version} (CPU build)"
        else:
            works = "works" if build.cuda_works else "CUDA does not initialise"
            here = f"{build.version} (CUDA {build.cuda}; {works})"
        bad = bool(model) and not build.cuda_works
        checks.append(
            Check(
                "torch",
                "a CUDA build that sees the GPU" if model else "",
                here,
                not bad,
                required=bad,
                fix=(
                    "install PyPI's torch wheel (the CUDA build on Linux): see "
                    "site/docs/operators/gpu.md, 'A GPU box'"
                    if bad
                    else ""
                ),
            )
        )
        if self.backend == "docker":
            checks.append(
                Check(
                    "docker GPUs",
                    "the NVIDIA runtime or CDI" if model else "",
                    gpu_support or "none (no nvidia runtime, no CDI spec)",
                    gpu_support is not None or not model,
                    required=bool(model) and gpu_support is None,
                    fix=(
                        "install nvidia-container-toolkit and configure the engine "
                        "(nvidia-ctk runtime configure) or generate a CDI spec"
                        if model and gpu_support is None
                        else ""
                    ),
                )
            )
        return checks

    def _disk(self) -> Check:
        where = state_dir()
        probe = where
        while not probe.exists():
            probe = probe.parent
        free = shutil.disk_usage(probe).free
        recipe = self.track.train_data
        data = recipe.max_bytes if recipe is not None else 0
        cap = self.track.workspace_disk_bytes
        plan = plan_disk(free, data, cap, self.workspace_kind(cap or 0))
        return Check(
            "disk",
            plan.need,
            f"{_gib(free)} free at {where}: {plan.here}",
            plan.ok,
            required=not plan.ok and not self.track.demo,
            fix=""
            if plan.ok
            else (
                f"free {_gib(plan.short)} more there, or move the state folder to a larger "
                "disk (ARI_HOME=/path/on/it)"
            ),
        )


def workspace_kind(cap: int) -> str:
    """What a run's workspace will be on (`capped.cap_folder` with "auto"): "ext4" (a sparse
    image on the disk), "tmpfs" (memory) or "disk" (uncapped, straight on the disk)."""
    from toolkit.sandbox import capped

    if not cap:
        return "disk"
    if capped.unavailable("ext4") is None:
        return "ext4"
    if capped.unavailable("tmpfs") is None and cap <= capped._memory_cap():
        return "tmpfs"
    return "disk"


@dataclass(frozen=True)
class DiskPlan:
    """What a run will take of the state folder's disk, against what it has."""

    ok: bool
    need: str
    here: str
    short: int
    """Bytes missing (0 when ok)."""


def plan_disk(free: int, data: int, cap: int | None, kind: str) -> DiskPlan:
    """A run first prepares its training data (`data` bytes, from the track's recipe; 0 when
    unknown) in the state folder, then copies it into its workspace and works there: a
    capped workspace (`kind` "ext4") is a sparse image of the track's cap lowered to half of
    the free disk left, so the free disk must hold the data and twice the least workspace
    (its data copy and `WORK_ROOM_BYTES`); a memory-backed one ("tmpfs") takes no disk; an
    uncapped one ("disk") takes what it holds. The least workspace is never more than the
    track's cap: a track that caps it lower has said how much room its runs get."""
    least = data + WORK_ROOM_BYTES
    if cap and kind == "ext4":
        least = min(least, cap)
    what = f"{_gib(data)} of prepared data, then " if data else ""
    if kind == "ext4":
        needed = data + int(least / FREE_SHARE)
        given = min(cap or 0, int(max(0, free - data) * FREE_SHARE))
        need = (
            f"{_gib(needed)} free: {what}a workspace of at least {_gib(least)}, which "
            "may take at most half of the disk left"
        )
        here = f"the workspace would be capped at {_gib(given)} (the track's cap: {_gib(cap or 0)})"
    elif kind == "tmpfs":
        needed = data
        need = f"{_gib(needed)} free for the prepared data (the workspace is in memory)"
        here = "the workspace would be a tmpfs (memory)"
    else:
        needed = data + least
        need = f"{_gib(needed)} free: {what}an uncapped workspace of at least {_gib(least)}"
        here = "the workspace would be uncapped"
    short = max(0, needed - free)
    return DiskPlan(short == 0, need, here, short)


def opencode_check(required: bool) -> Check:
    """The pinned opencode binary."""
    from toolkit.agents.scaffold import OPENCODE_VERSION, binary_version, find_binary

    binary = find_binary()
    version = None
    if binary is not None:
        with contextlib.suppress(Exception):
            version = binary_version(binary)
    ok = version == OPENCODE_VERSION
    return Check(
        "opencode",
        f"opencode {OPENCODE_VERSION}" if required else "",
        f"{version} at {binary}" if version else "not installed",
        ok or not required,
        required=required and not ok,
        fix="" if ok else "make opencode",
    )


def failed(checks: list[Check]) -> list[Check]:
    """The required checks that failed: the track cannot run validly here."""
    return [c for c in checks if c.required and not c.ok]
