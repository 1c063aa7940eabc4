"""Sandboxes: where submitted and agent code runs, chosen by backend name.

    from toolkit.sandbox import Limits, create_sandbox
    with create_sandbox("local", root=workdir, hide=[exam_dir]) as box:
        result = box.exec(["python", "-c", "print(1)"], timeout=10)

Two backends implement the same `Sandbox` class and pass the same conformance tests
(`tests/sandbox/`): `local` (processes on this host, in namespaces; the package `local/`) and
`docker` (one container per sandbox, a `docker exec` per command; the package `docker/`).

The layout: this folder holds the contract (`base.py`) and the helpers more than one backend
uses (`streams.py`, `files.py`, `cores.py`, `capped.py`, `mountinfo.py`); each backend is a
package of its own, whose `create` is a `base.SandboxFactory`, listed in `BACKEND_PACKAGES`
and imported only when asked for. The imports run one way: a backend imports this folder's
modules, never another backend, and nothing at this level imports a backend
(`tests/sandbox/test_layout_rules.py` holds both). A new backend is one new folder and one line
in `BACKEND_PACKAGES`.

The words in `Sandbox.isolation` / `not_isolated` (recorded with every run):

    pgroup, subreaper   the tree is killed whole (own session; orphans stay findable)
    pidns               own PID namespace: the host's processes are invisible, and the tree
                        dies with its first process
    netns / network     no network but an own loopback / network reachable
    egress-allowlist    (with `egress`) only the listed (host, port) pairs are reachable, over
                        TCP; every attempt is logged (`Sandbox.egress_log`)
    mountns             own mount namespace, with: host-filesystem-readonly (every host
                        mount read-only, /proc/sys too; devices still work), hidden-paths
                        (empty read-only tmpfs over them), readonly-paths (read-only bind
                        mounts), private-tmp (/tmp, /var/tmp, /dev/shm, /run with /run/lock
                        and /var/lock, /dev/mqueue: one fresh tmpfs per tree, gone with it;
                        TMPDIR is inside root and persists)
    cgroupns            own cgroup namespace, rooted at the tree's own cgroups (/proc/self/cgroup
                        names no host path)
    neighbours-masked   the kernel's views of other sandboxes are not seen (`neighbours.py`):
                        /sys/fs/cgroup holds only the sandbox's own cgroups, no block, loop or
                        network device of the host, no /proc/diskstats, no filesystem's
                        per-device counters (in not_isolated, `neighbours`: this host cannot)
    ipcns, utsns        own System V IPC objects and POSIX message queues, own hostname
    no-keyrings         a seccomp filter refuses add_key/request_key/keyctl: the keyrings of
                        a sandbox uid cannot carry data from one sandbox to another
    no-file-notify      the same filter refuses inotify, fanotify and fcntl(F_NOTIFY): no
                        sandbox sees when another opens or reads a file both can see
    userns              (non-root hosts) the namespaces come from a user namespace, and the
                        mounts are locked in it
    host-allowlist      only the system folders (/usr, /bin, /sbin, /lib*, /etc, /dev, /proc,
                        /sys), the private places and the sandbox's own paths are seen: every
                        other entry of / (and of /var) is an empty tmpfs (docker: the image and
                        the explicit mounts only)
    private-home        the caller's home is an empty read-only tmpfs (the sandbox's own paths
                        inside it stay visible), so sandboxed code cannot read its files
    uid:own             commands run as a uid of the sandbox's own, claimed host-wide from a
                        range (`uids.py`): no per-user counter of the kernel is shared
                        with another sandbox (sandboxes of one process on one root share it)
    uid:NAME / uid      commands run as that user / as the caller's own uid on the host
    no-new-privs        setuid binaries and file capabilities grant nothing
    cgroup-pids, cgroup-memory, cgroup-cpu, rlimits, memory-per-tree, process-count: how
                        `Limits` are enforced, or (in not_isolated) that they are not, per tree
    cpu-quota           `Limits.cpus` is enforced for the whole sandbox (docker), or (in
                        not_isolated) that this host cannot enforce it
    disk-cap            `disk_bytes` caps the private places together (one tmpfs size)
    ephemeral-root      the root is an overlay per command: its writes land in the capped
                        private places and vanish with the command; the host's folder is
                        never written (in not_isolated: asked for, but this host cannot)
    root-disk-cap       the root lies on a folder with a filesystem of its own, of fixed size
                        (`capped.cap_folder`: a loop-mounted image or a tmpfs), which writes
                        cannot grow past; other runs' capped folders are detached from view
    root-disk           (in not_isolated) the root is the caller's folder on the host's disk,
                        capped only per file (`file_size_bytes`)
    scrubbed-env        only PATH, HOME, LANG, TMPDIR, the thread-pool sizes (`cores.py`)
                        and the variables given
    gpu-pinned / gpus   (gpus=[...]) the other GPUs' device nodes are hidden and the
                        environment names the given ones / (not_isolated) only the environment
                        selects them: other GPUs stay reachable
    system-folders-readable, kernel, devices: never isolated locally (files in the
                        system folders stay readable wherever the sandbox user may read
                        them; without namespaces: host-filesystem-readable, the whole host)
    cpu-share           (in not_isolated) no CPU quota was asked: the sandbox competes for
                        every core of the host
    keyrings            (in not_isolated) no seccomp filter on this host
    host-filesystem-writable, mounts, ipc, uts, disk: (in not_isolated, hosts without
                        namespaces) writable wherever the caller may write, no private
                        places, shared IPC and hostname, no disk cap beyond each file

Words of the docker backend (besides pidns, mountns, netns, ipcns, utsns, pgroup, ...):

    container           every command runs in the sandbox's container (image: below)
    image:ID            the first 12 hex digits of the image id the container runs
    caps-dropped        all capabilities dropped from the sandbox's processes
    readonly-rootfs     the image's filesystem is read-only; only the root, /tmp and /var/tmp
                        (private tmpfs) are writable
    egress-allowlist    no network but TCP to the `egress` (host, port) pairs, through a
                        forwarder container on an internal network; every attempt is logged
    disk-cap / root-disk / root-disk-cap  as above: `disk_bytes` caps /tmp, /var/tmp and
                        /dev/shm together; the root is a bind mount of a host folder, capped
                        only when it lies on a capped folder (a run's workspace)
    root-readonly       the root is mounted read-only (the grader's): writes under it are
                        refused, so only the capped tmpfs places take any (docker offers no
                        ephemeral root: `ephemeral-root` is then in not_isolated)
    no-gpu / gpus:IDS   no GPU device in the container / exactly these GPU ids
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from pathlib import Path

from toolkit.sandbox.base import (
    NO_LIMITS,
    Egress,
    ExecResult,
    Limits,
    Sandbox,
    SandboxError,
    SandboxFactory,
    SandboxProcess,
    SandboxRootAltered,
    SandboxTeardownTimeout,
    teardown_wait_s,
)
from toolkit.sandbox.streams import LineReader

# Each backend by name: a package of this one that exports `create` (a `SandboxFactory`).
BACKEND_PACKAGES: dict[str, str] = {
    "local": "toolkit.sandbox.local",
    "docker": "toolkit.sandbox.docker",
}
BACKENDS = tuple(BACKEND_PACKAGES)

__all__ = [
    "BACKENDS",
    "BACKEND_PACKAGES",
    "Egress",
    "ExecResult",
    "Limits",
    "LineReader",
    "Sandbox",
    "SandboxError",
    "SandboxFactory",
    "SandboxProcess",
    "SandboxRootAltered",
    "SandboxTeardownTimeout",
    "create_sandbox",
    "teardown_wait_s",
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
    ephemeral_root: bool = False,
) -> Sandbox:
    """A sandbox of `backend` working in `root` (an existing directory; commands start there).

    `network`: False = no network at all (a loopback of its own only). `hide`: host paths that
    must be invisible inside (an exam, results, banks); a hidden folder may hold the root or
    read-only paths, which stay visible (nothing else of it does). `readonly`: host paths
    visible but not writable (training data); the rest of the host is read-only too where the
    backend can (`host-filesystem-readonly`), and the places programs write to (/tmp, ...) are
    private to each command. `limits`: caps per process tree (`disk_bytes` included). `env`:
    variables added to the scrubbed environment (PATH, HOME=root, LANG=C.UTF-8, TMPDIR inside
    root).

    `ephemeral_root`: for one-shot sandboxes (a grading). Each command sees the root's files as
    they are when it starts, but what it writes there (new files, changes, deletions) goes to
    its private places, counts against `disk_bytes` with them, and vanishes when it ends: the
    root folder on the host is never written by a command, so `read_file` sees only what the
    host put there, and a later command does not see an earlier one's writes. Where the host
    cannot (`ephemeral-root` in `not_isolated`), commands write to the root as usual. Nothing
    else may change the root folder while a command runs (the overlay would not notice).

    The sandbox may run commands as another user (as root, a uid of its own: `uids`): it
    is handed the files already in `root` when created; put later files in with `write_file`.
    `egress` (network must be False): the only (host, port) pairs TCP may reach, logged in
    `egress_log`. `gpus`: None = the backend's default (local: the host's GPUs as they are;
    docker: none), a list = exactly those GPU ids (local: `CUDA_VISIBLE_DEVICES` names them and
    the other `/dev/nvidia<N>` are hidden, see `local/gpus.py`), [] = none. `image` (docker only):
    the image to run, default the runner image of `toolkit.images`.
    Read `isolation` / `not_isolated` for what is in force on this host, and record them.
    Raises ValueError for an unknown backend or contradictory paths, SandboxError when the
    sandbox cannot be set up.
    """
    package = BACKEND_PACKAGES.get(backend)
    if package is None:
        known = ", ".join(repr(b) for b in BACKENDS)
        raise ValueError(f"unknown sandbox backend {backend!r}; known backends: {known}")
    factory: SandboxFactory = importlib.import_module(package).create
    return factory(
        root,
        network=network,
        hide=hide,
        limits=limits,
        env=env,
        readonly=readonly,
        egress=egress,
        gpus=gpus,
        image=image,
        ephemeral_root=ephemeral_root,
    )
