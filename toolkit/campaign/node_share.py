"""A Ray host's cores, shared between the runs it holds at once, as the local engine shares a box.

A Ray task is scheduled by a resource (a GPU, or one unit of `--ray-resource`), not by cores,
and Ray gives it no CPU affinity. Left alone, each run on a host sizes its sandboxes' thread
pools to every core of the host (`sandbox.cores`), so two gradings at once on a 2-core node run
four busy threads on two cores and each takes three to five times as long as in a local slot
(measured: 32 s against 11.7 s for the same grading; see the maintainers' campaigns page).

So the task takes a share first, the same one a local slot would get: the host's units of the
resource are its slots (a host with `ari_slot: 2` has two), the task claims a free slot index
with an exclusive `flock` on `$ARI_HOME/core-shares/<host>/<unit>-<i>.lock`, and its run process
pins itself to that slot's cores (`cores.slot_cores`, passed as `CORES_ENV`) before any thread
pool exists. The claim's descriptor goes to the run process too, so a run that outlives its
Ray worker keeps its cores until it stops; the kernel drops the lock when the last holder dies.

Ray also sets `OMP_NUM_THREADS=1` in a worker that runs a task asking for no CPUs (the engine
asks for none). That value is Ray's, not the operator's: the run process gets it only when the
worker was started with it (the operator's), and sizes its own pools to its share otherwise.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolkit.paths import state_dir
from toolkit.sandbox.cores import CORES_ENV, slot_cores, usable_cores

SHARES_DIR = "core-shares"
RAY_THREAD_VAR = "OMP_NUM_THREADS"  # what Ray sets in a worker whose task asks for no CPUs


@dataclass(frozen=True)
class Share:
    """A run's share of its host: slot `index` of `slots`, its cores (None: every core, when
    the host has fewer cores than slots or no slot could be claimed), the claim's descriptor."""

    index: int | None
    slots: int
    cores: list[int] | None
    fd: int | None

    def describe(self) -> str:
        if self.cores is None:
            return f"no core share ({self.slots} slot(s) on this host): every core"
        return f"slot {self.index} of {self.slots}: cores {','.join(map(str, self.cores))}"


def _safe(name: str) -> str:
    """`name` as one file-name part (letters, digits, `-_.` kept)."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:64] or "_"


def host_slots(nodes: Iterable[Mapping[str, Any]], host: str, unit: str, node_id: str) -> int:
    """Units of `unit` on the alive Ray nodes of `host` (`ray.nodes()` entries; `node_id`, the
    asking node, counts whatever name its host has): the host's slots."""
    total = 0.0
    for node in nodes:
        mine = node.get("NodeManagerHostname") == host or node.get("NodeID") == node_id
        if node.get("Alive") and mine:
            total += float((node.get("Resources") or {}).get(unit, 0.0))
    return max(1, math.floor(total + 1e-9))


def claim_slot(slots: int, unit: str, folder: Path | None = None) -> tuple[int, int] | None:
    """(index, descriptor) of a free slot of this host, held until the descriptor closes; None
    when every slot is held (more runs than units: Ray never starts those) or the state
    folder cannot take the claims."""
    where = folder or state_dir() / SHARES_DIR / _safe(socket.gethostname())
    try:
        where.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    for index in range(slots):
        try:
            fd = os.open(where / f"{_safe(unit)}-{index}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        os.set_inheritable(fd, False)  # passed on by name (`pass_fds`), never by accident
        return index, fd
    return None


def take_share(slots: int, unit: str, folder: Path | None = None) -> Share:
    """This task's share of the host's cores: a claimed slot and its cores."""
    claimed = claim_slot(slots, unit, folder)
    if claimed is None:
        return Share(None, slots, None, None)
    index, fd = claimed
    return Share(index, slots, slot_cores(index, slots), fd)


def release(share: Share) -> None:
    if share.fd is not None:
        with contextlib.suppress(OSError):
            os.close(share.fd)


def run_env(base: Mapping[str, str], share: Share, launched: Mapping[str, str]) -> dict[str, str]:
    """The run process's environment: the worker's (`base`), with the share's cores, and
    without the thread count Ray set itself (one not in the worker's `launched` environment)."""
    env = dict(base)
    if RAY_THREAD_VAR in env and RAY_THREAD_VAR not in launched:
        del env[RAY_THREAD_VAR]
    if share.cores is not None:
        env[CORES_ENV] = ",".join(map(str, share.cores))
    return env


def launch_environ() -> dict[str, str]:
    """The environment this process was started with (`/proc/self/environ`: what Python or Ray
    set since does not show there); this process's own where that cannot be read."""
    try:
        raw = Path("/proc/self/environ").read_bytes()
    except OSError:
        return dict(os.environ)
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}


@dataclass(frozen=True)
class HostFacts:
    """What a Ray node's worker sees of its host (a probe task's answer)."""

    node: str
    host: str
    cores: int
    slots: int

    def problem(self) -> str | None:
        if self.slots <= self.cores:
            return None
        return (
            f"Ray node {self.node[:8]} ({self.host}) holds {self.slots} slots on "
            f"{self.cores} usable core(s): its runs share every core and their gradings slow "
            f"each other down; give the host at most {self.cores} units"
        )


def host_facts(node: str, nodes: Iterable[Mapping[str, Any]], unit: str) -> HostFacts:
    """The probe, run on a node: its host's slots for `unit` and the cores a worker may use."""
    host = socket.gethostname()
    return HostFacts(node, host, len(usable_cores()), host_slots(nodes, host, unit, node))
