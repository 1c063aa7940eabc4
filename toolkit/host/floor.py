"""The isolation floor: what a track says a valid run needs, checked before it starts.

A track lists requirements (`Track.isolation_floor`) in the words below; each is a property of
the roles' sandboxes, read from the words the sandboxes record (`Sandbox.isolation`, see
`toolkit.sandbox`), so both backends are judged alike:

    roles-isolated      every role in its own PID and mount namespaces (a container is both)
    no-network          runner and grader without network; the controller reaches only its
                        provider relay (its own network namespace, with an egress allow-list)
    memory-per-tree     a memory cap on each role's whole process tree (cgroup), not a
                        per-process address-space limit (which CUDA cannot live with anyway)
    processes-per-tree  a cap on each tree's processes and threads (pids cgroup)
    gpu-pinned          with a GPU: the runner and grader see exactly the run's GPU

An official track names them all: a run that cannot have one refuses to start and says which
backend would do. A demo track names none: it degrades, and its result records what it lacked
(`not_isolated`). `predict` answers from the host alone (before any work: `toolkit run`'s
pre-flight and `toolkit doctor`); `missing` from the sandboxes a run actually made.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from toolkit.tracks.model import FLOOR_WORDS

OFFICIAL_FLOOR = tuple(FLOOR_WORDS)


def _has(requirement: str, role: str, words: set[str], gpu: bool) -> bool:
    if requirement == "roles-isolated":
        return {"pidns", "mountns"} <= words
    if requirement == "no-network":
        return "netns" in words or (role == "controller" and "egress-allowlist" in words)
    if requirement == "memory-per-tree":
        return "cgroup-memory" in words
    if requirement == "processes-per-tree":
        return "cgroup-pids" in words
    if requirement == "gpu-pinned":
        if not gpu or role == "controller":
            return True  # the controller never gets a GPU
        return "gpu-pinned" in words or any(w.startswith("gpus:") for w in words)
    raise ValueError(f"unknown isolation requirement {requirement!r}")


def missing(
    floor: Iterable[str], isolation: Mapping[str, Iterable[str]], *, gpu: bool
) -> list[str]:
    """`role: requirement` for each requirement a role's recorded isolation lacks."""
    out = []
    for role, words in isolation.items():
        have = set(words)
        out += [f"{role}: {r}" for r in floor if not _has(r, role, have, gpu)]
    return out


@dataclass(frozen=True)
class HostIsolation:
    """What a backend can give on this host, as far as can be told without starting it."""

    backend: str
    available: bool
    why_not: str | None = None
    namespaces: bool = False
    memory_per_tree: bool = False
    processes_per_tree: bool = False
    gpu_pinning: bool = False

    def lacks(self, floor: Iterable[str], *, gpu: bool) -> list[str]:
        """The requirements of `floor` this backend cannot meet here."""
        if not self.available:
            return [f"{r} ({self.why_not})" for r in floor] if floor else []
        has = {
            "roles-isolated": self.namespaces,
            "no-network": self.namespaces,
            "memory-per-tree": self.memory_per_tree,
            "processes-per-tree": self.processes_per_tree,
            "gpu-pinned": self.gpu_pinning or not gpu,
        }
        return [r for r in floor if not has[r]]


def local_isolation() -> HostIsolation:
    """The local backend on this host (the sandbox layer's own probe)."""
    from toolkit.sandbox.local import host as local_host

    s = local_host.probe()
    return HostIsolation(
        backend="local",
        available=True,
        namespaces=s.namespaces,
        memory_per_tree=s.memory_parent is not None,
        processes_per_tree=s.pids_parent is not None,
        gpu_pinning=s.namespaces,
    )


def docker_isolation(gpu_support: str | None) -> HostIsolation:
    """The docker backend: every container is isolated and capped; GPUs need the engine's
    NVIDIA runtime or CDI (`gpu_support`: which, or None)."""
    from toolkit.sandbox import SandboxError
    from toolkit.sandbox.docker import engine as docker_engine

    try:
        docker_engine.connect()
    except SandboxError as exc:
        return HostIsolation(backend="docker", available=False, why_not=str(exc))
    return HostIsolation(
        backend="docker",
        available=True,
        namespaces=True,
        memory_per_tree=True,
        processes_per_tree=True,
        gpu_pinning=gpu_support is not None,
    )
