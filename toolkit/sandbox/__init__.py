"""Sandboxes: where submitted and agent code runs, chosen by backend name.

    from toolkit.sandbox import Limits, create_sandbox
    with create_sandbox("local", root=workdir, hide=[exam_dir]) as box:
        result = box.exec(["python", "-c", "print(1)"], timeout=10)

Two backends implement the same `Sandbox` class and pass the same conformance tests
(`tests/sandbox/`): `local` (processes on this host, in namespaces) and `docker` (one container
per sandbox, a `docker exec` per command; `docker_sandbox.py`).

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
    host-filesystem-readable, kernel, cpu-share, devices, ipc, uts: never isolated locally

Words of the docker backend (besides pidns, mountns, netns, ipc, uts, pgroup, subreaper, ...):

    container           every command runs in the sandbox's container (image: below)
    image:ID            the first 12 hex digits of the image id the container runs
    caps-dropped        all capabilities dropped from the sandbox's processes
    readonly-rootfs     the image's filesystem is read-only; only the root, /tmp and /var/tmp
                        (private tmpfs) are writable
    egress-allowlist    no network but TCP to the `egress` (host, port) pairs, through a
                        forwarder container on an internal network; every attempt is logged
    disk-tmpfs / disk-root   `disk_bytes` caps the tmpfs mounts / (not isolated) the root is a
                        bind mount of a host folder and is not capped
    no-gpu / gpus:IDS   no GPU device in the container / exactly these GPU ids
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from toolkit.sandbox.base import (
    NO_LIMITS,
    Egress,
    ExecResult,
    Limits,
    Sandbox,
    SandboxError,
    SandboxProcess,
)
from toolkit.sandbox.streams import LineReader

BACKENDS = ("local", "docker")

__all__ = [
    "BACKENDS",
    "Egress",
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
    egress: Sequence[Egress] = (),
    gpus: Sequence[str] | None = None,
    image: str | None = None,
) -> Sandbox:
    """A sandbox of `backend` working in `root` (an existing directory; commands start there).

    `network`: False = no network at all (a loopback of its own only). `hide`: host paths that
    must be invisible inside (an exam, results, banks). `readonly`: host paths visible but not
    writable (training data). `limits`: caps per process tree. `env`: variables added to the
    scrubbed environment (PATH, HOME=root, LANG=C.UTF-8, TMPDIR inside root).

    The sandbox may run commands as another user (`nobody` for the local backend as root): it
    is handed the files already in `root` when created; put later files in with `write_file`.
    `egress` (network must be False): the only (host, port) pairs TCP may reach, logged in
    `egress_log`. `gpus`: None = the backend's default (local: the host's GPUs as they are;
    docker: none), a list = exactly those GPU ids, [] = none. `image` (docker only): the image
    to run, default the runner image of `toolkit.images`.
    Read `isolation` / `not_isolated` for what is in force on this host, and record them.
    Raises ValueError for an unknown backend or contradictory paths, SandboxError when the
    sandbox cannot be set up.
    """
    if backend == "local":
        from toolkit.sandbox.local import LocalSandbox

        return LocalSandbox(
            root, network=network, hide=hide, limits=limits, env=env, readonly=readonly
        )
    if backend == "docker":
        from toolkit.sandbox.docker_sandbox import DockerSandbox

        return DockerSandbox(
            root,
            network=network,
            hide=hide,
            limits=limits,
            env=env,
            readonly=readonly,
            egress=egress,
            gpus=gpus,
            image=image,
        )
    known = ", ".join(repr(b) for b in BACKENDS)
    raise ValueError(f"unknown sandbox backend {backend!r}; known backends: {known}")
