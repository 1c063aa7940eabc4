"""Sandboxes: where submitted and agent code runs, chosen by backend name.

    from toolkit.sandbox import Limits, create_sandbox
    with create_sandbox("local", root=workdir, hide=[exam_dir]) as box:
        result = box.exec(["python", "-c", "print(1)"], timeout=10)

`local` is the only backend so far; `docker` will implement the same `Sandbox` class and pass
the same conformance tests (`tests/sandbox/`).

The words in `Sandbox.isolation` / `not_isolated` (recorded with every run):

    pgroup, subreaper   the tree is killed whole (own session; orphans stay findable)
    pidns               own PID namespace: the host's processes are invisible, and the tree
                        dies with its first process
    netns / network     no network but an own loopback / network reachable
    mountns             own mount namespace, with: hidden-paths (empty tmpfs over them),
                        readonly-paths (read-only bind mounts), private-tmp (/tmp, /var/tmp,
                        /dev/shm are fresh tmpfs; TMPDIR is inside root and persists)
    userns              (non-root hosts) the namespaces come from a user namespace, and the
                        mounts are locked in it
    private-home        (no user switch) the caller's home is an empty tmpfs, so code running
                        as the caller cannot read its files; the sandbox's own paths stay
    uid:NAME / uid      commands run as that user / as the caller's own uid on the host
    no-new-privs        setuid binaries and file capabilities grant nothing
    cgroup-pids, cgroup-memory, rlimits, memory-per-tree, process-count: how `Limits` are
                        enforced, or (in not_isolated) that they are not, per tree
    scrubbed-env        only PATH, HOME, LANG, TMPDIR and the variables given
    gpu-pinned / gpus   (gpus=[...]) the other GPUs' device nodes are hidden and the
                        environment names the given ones / (not_isolated) only the environment
                        selects them: other GPUs stay reachable
    host-filesystem-readable, kernel, cpu-share, devices, ipc, uts: never isolated locally
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from toolkit.sandbox.base import (
    NO_LIMITS,
    ExecResult,
    Limits,
    Sandbox,
    SandboxError,
    SandboxProcess,
)
from toolkit.sandbox.streams import LineReader

BACKENDS = ("local",)

__all__ = [
    "BACKENDS",
    "ExecResult",
    "Limits",
    "LineReader",
    "Sandbox",
    "SandboxError",
    "SandboxProcess",
    "create_sandbox",
]


def create_sandbox(
    backend: str,
    *,
    root: Path,
    network: bool = False,
    hide: Sequence[Path] = (),
    limits: Limits = NO_LIMITS,
    env: Mapping[str, str] | None = None,
    readonly: Sequence[Path] = (),
    gpus: Sequence[str] | None = None,
) -> Sandbox:
    """A sandbox of `backend` working in `root` (an existing directory; commands start there).

    `network`: False = no network at all (a loopback of its own only). `hide`: host paths that
    must be invisible inside (an exam, results, banks). `readonly`: host paths visible but not
    writable (training data). `limits`: caps per process tree. `env`: variables added to the
    scrubbed environment (PATH, HOME=root, LANG=C.UTF-8, TMPDIR inside root). `gpus`: None =
    the host's GPUs as they are; a list of GPU ids (index or UUID) = exactly those (local:
    `CUDA_VISIBLE_DEVICES`, the other `/dev/nvidia<N>` hidden; see `gpus.py`); [] = no GPU.

    The sandbox may run commands as another user (`nobody` for the local backend as root): it
    is handed the files already in `root` when created; put later files in with `write_file`.
    Read `isolation` / `not_isolated` for what is in force on this host, and record them.
    Raises ValueError for an unknown backend or contradictory paths, SandboxError when the
    sandbox cannot be set up.
    """
    if backend == "local":
        from toolkit.sandbox.local import LocalSandbox

        return LocalSandbox(
            root,
            network=network,
            hide=hide,
            limits=limits,
            env=env,
            readonly=readonly,
            gpus=gpus,
        )
    known = ", ".join(repr(b) for b in BACKENDS)
    raise ValueError(f"unknown sandbox backend {backend!r}; known backends: {known}")
