"""Pinning a sandbox to some of the host's GPUs (local backend): what to set, what to hide.

`create_sandbox(..., gpus=[...])` pins the sandbox's processes to exactly those GPUs: the
environment selects them (`CUDA_VISIBLE_DEVICES`) and the device nodes of every other GPU
(`/dev/nvidia<minor>`) are hidden, so a process that rewrites its own environment still cannot
open another GPU. `gpus=[]` hides every GPU device node. `gpus=None` leaves the host as it is.

A GPU id is what `nvidia-smi` and Ray call it: an index in PCI bus order, or a UUID
(`GPU-...`). The index is not the device node's number in general, nor CUDA's default order
(fastest first), so ids are resolved through `/proc/driver/nvidia/gpus/<bus id>/information`
(bus order, device minor, UUID), and the environment names the chosen GPUs by UUID, which
means the same GPU whatever order CUDA enumerates in and whether or not it counts the hidden
ones. Where the driver's proc files are absent (no NVIDIA driver; tests; simulated clusters),
an index is taken to be the device minor and passed on as given.

NVIDIA only: AMD and Intel GPUs are hidden by `gpus=[]` but not pinned one by one. Not
exercised on a GPU host by this repository's CI (it has none).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

NVIDIA_PROC = Path("/proc/driver/nvidia/gpus")
DEV = Path("/dev")
# Nodes of the whole GPU stack, hidden when a sandbox gets no GPU at all.
ALL_GPU_PATTERNS = ("nvidia*", "dri/*", "kfd")


@dataclass(frozen=True)
class Gpu:
    """One NVIDIA GPU of this host."""

    index: int
    """Position in PCI bus order (nvidia-smi's index, Ray's GPU id)."""
    minor: int
    """Its device node is /dev/nvidia<minor>."""
    uuid: str | None
    """`GPU-...`, when the driver reports it."""


@dataclass(frozen=True)
class GpuPin:
    """What a sandbox pinned to some GPUs sets in its environment and hides."""

    env: dict[str, str] = field(default_factory=dict)
    hide: list[Path] = field(default_factory=list)


def host_gpus(proc: Path | None = None) -> list[Gpu]:
    """The NVIDIA GPUs the driver lists in /proc, in bus order; [] without the driver."""
    proc = proc or NVIDIA_PROC
    try:
        entries = sorted(p for p in proc.iterdir() if (p / "information").is_file())
    except OSError:
        return []
    found: list[Gpu] = []
    for index, entry in enumerate(entries):
        info = (entry / "information").read_text(errors="replace")
        minor = re.search(r"^Device Minor:\s*(\d+)", info, re.MULTILINE)
        uuid = re.search(r"^GPU UUID:\s*(\S+)", info, re.MULTILINE)
        found.append(
            Gpu(
                index=index,
                minor=int(minor.group(1)) if minor else index,
                uuid=uuid.group(1) if uuid else None,
            )
        )
    return found


def _numbered_nodes(dev: Path) -> dict[int, Path]:
    nodes: dict[int, Path] = {}
    for path in dev.glob("nvidia*"):
        match = re.fullmatch(r"nvidia(\d+)", path.name)
        if match:
            nodes[int(match.group(1))] = path
    return nodes


def host_gpu_ids(proc: Path | None = None, dev: Path | None = None) -> list[str]:
    """Ids of this host's GPUs ("0", "1", ...): from the driver, else from the device nodes."""
    gpus = host_gpus(proc)
    if gpus:
        return [str(g.index) for g in gpus]
    return [str(minor) for minor in sorted(_numbered_nodes(dev or DEV))]


def pin(ids: Sequence[str], *, proc: Path | None = None, dev: Path | None = None) -> GpuPin:
    """The environment and the hidden device nodes that confine a sandbox to `ids`.

    Raises ValueError for an id that names no GPU of a host whose driver lists its GPUs.
    """
    dev = dev or DEV
    if not ids:
        hidden = sorted(p for pattern in ALL_GPU_PATTERNS for p in dev.glob(pattern))
        return GpuPin(
            env={"CUDA_VISIBLE_DEVICES": "", "NVIDIA_VISIBLE_DEVICES": "void"}, hide=hidden
        )
    gpus = host_gpus(proc)
    chosen: list[Gpu] = []
    for gpu_id in ids:
        text = str(gpu_id).strip()
        match = [g for g in gpus if str(g.index) == text or g.uuid == text]
        if match:
            chosen.append(match[0])
        elif not gpus and text.isdigit():
            chosen.append(Gpu(index=int(text), minor=int(text), uuid=None))
        else:
            known = ", ".join(f"{g.index} ({g.uuid})" for g in gpus) or "none"
            raise ValueError(f"GPU {text!r} is not a GPU of this host (GPUs: {known})")
    names = ",".join(g.uuid or str(g.index) for g in chosen)
    minors = {g.minor for g in chosen}
    hidden = [path for minor, path in sorted(_numbered_nodes(dev).items()) if minor not in minors]
    env = {
        "CUDA_VISIBLE_DEVICES": names,
        "NVIDIA_VISIBLE_DEVICES": names,
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
    }
    return GpuPin(env=env, hide=hidden)
