"""The local backend: every command is a process tree on this host, in namespaces of its own.

    sandbox.py     LocalSandbox and its `create` (the backend's `SandboxFactory`)
    process.py     LocalProcess: one started tree, waited on and killed through a pidfd
    forkserver.py  the host's end of the launcher's socket
    launcher.py    the launcher: the fork server that starts every tree (run as a script)
    mounts.py      the mount calls the launcher makes in a tree's mount namespace
    seccomp.py     the keyring filter (imported by the launcher; run as a script to probe)
    layout.py      the plan of a tree's filesystem: pure functions over host paths
    host.py        what this host allows (probed once per process) and each tree's cgroups
    cgroups.py     where trees' cgroups go on a cgroup-v2 host (the layouts, and their writes)
    egress.py      the egress allow-list's host side (DNS and TCP relays)
    gpus.py        pinning a sandbox to some of the host's GPUs (and finding them)

Module names carry no leading underscore: this folder is the backend's boundary, and every
module in it is the backend's own. Other parts of the toolkit import `LocalSandbox` from here
and, where they must ask the host itself, `host` (the probe: `toolkit doctor`, the floor),
`layout` (the system folders) and `gpus` (the host's GPUs). The launcher and `seccomp.py` run
as scripts (`python -I -S FILE`), stdlib only: they import their siblings, and the shared
`../mountinfo.py`, by path. Nothing here imports the docker backend.
"""

from toolkit.sandbox.local.sandbox import LocalSandbox, create

__all__ = ["LocalSandbox", "create"]
