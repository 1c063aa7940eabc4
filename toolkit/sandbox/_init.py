"""The first program inside a local sandbox: set the process up, then exec the command.

`local.py` starts `unshare --pid --net --mount ... python -I -S _init.py SPEC_JSON`. This script
runs as root (where the host allows) inside the fresh namespaces, and in this order:

1. joins the per-process cgroups (pids, memory) prepared by the host, before anything can fork;
2. rebuilds the visible filesystem: private tmpfs over /tmp-like directories and over ancestors
   that the sandbox user could not traverse, re-exposes the sandbox root and the read-only paths
   from file descriptors opened beforehand, remounts the read-only ones read-only, then covers
   every hidden path with an empty read-only tmpfs (or /dev/null for a file);
3. brings the namespace's loopback up, sets rlimits, drops to the sandbox uid/gid with
   no_new_privs (so the mounts above cannot be undone and no setuid binary helps);
4. chdirs and execs the command with exactly the environment it was given.

It must stay standalone (stdlib only, no toolkit import): it starts before the hidden paths are
hidden and may run where the toolkit is not importable by the sandbox user. Failures of the set-up
are the sandbox breaking: they exit with status 125 and write a line starting
`ari-sandbox:` on the status pipe, which the host turns into a SandboxError (a working
directory that does not exist counts as set-up: the caller asked for it). A command that
cannot be found or run exits 127/126 like a shell does: that is the command's result, not a
broken sandbox.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import resource
import socket
import stat
import struct
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

SETUP_FAILED = 125
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
PR_SET_NO_NEW_PRIVS = 38
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1
RLIMITS = {
    "as": resource.RLIMIT_AS,
    "nproc": resource.RLIMIT_NPROC,
    "cpu": resource.RLIMIT_CPU,
    "fsize": resource.RLIMIT_FSIZE,
    "core": resource.RLIMIT_CORE,
}

_libc = ctypes.CDLL(None, use_errno=True)
_status_fd = -1  # the host waits on this pipe for "ok" (about to exec) or the failure


def fail(what: str) -> None:
    line = f"ari-sandbox: {what}\n".encode()
    try:
        os.write(_status_fd, line)
    except OSError:
        os.write(2, line)
    os._exit(SETUP_FAILED)


def mount(source: str, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    rc = _libc.mount(
        source.encode(),
        target.encode(),
        fstype.encode() if fstype else None,
        ctypes.c_ulong(flags),
        data.encode() if data else None,
    )
    if rc != 0:
        err = ctypes.get_errno()
        fail(f"mount {source} on {target} failed: {os.strerror(err)}")


def join_cgroups(procs_files: list[str]) -> None:
    for path in procs_files:
        try:
            with open(path, "w") as f:
                f.write("0")
        except OSError as e:
            fail(f"cannot join cgroup {path}: {e}")


def make_mountpoint(path: str, is_dir: bool) -> None:
    """Create `path` (and parents) inside a fresh tmpfs so something can be mounted on it."""
    if os.path.lexists(path):
        return
    os.makedirs(os.path.dirname(path) or "/", mode=0o755, exist_ok=True)
    if is_dir:
        os.mkdir(path, 0o755)
    else:
        with open(path, "w"):
            pass


def rebuild_filesystem(spec: dict[str, Any]) -> None:
    expose: list[str] = spec["expose"]
    readonly = set(spec["readonly"])
    shadow: list[str] = spec["shadow"]
    hide: list[str] = spec["hide"]
    tmpfs_size = str(spec["tmpfs_size"])

    # File descriptors first: they keep pointing at the real directories after a tmpfs covers
    # the path they were reached by, so they can be bound back in below.
    fds: dict[str, int] = {}
    for path in expose:
        try:
            fds[path] = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError as e:
            fail(f"cannot open {path} to expose it in the sandbox: {e}")
    for path in sorted(shadow, key=len):
        if not os.path.isdir(path):
            continue
        mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={tmpfs_size}")
    for path in expose:
        is_dir = stat.S_ISDIR(os.fstat(fds[path]).st_mode)
        make_mountpoint(path, is_dir)
        mount(f"/proc/self/fd/{fds[path]}", path, None, MS_BIND | MS_REC, None)
        if path in readonly:
            mount("none", path, None, MS_BIND | MS_REC | MS_REMOUNT | MS_RDONLY | MS_NOSUID, None)
        os.close(fds[path])
    for path in hide:
        if not os.path.lexists(path):
            continue  # already invisible (it lay under a private tmpfs)
        if os.path.isdir(path) and not os.path.islink(path):
            mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "mode=0555,size=4k")
        else:
            mount("/dev/null", path, None, MS_BIND, None)
            mount("none", path, None, MS_BIND | MS_REMOUNT | MS_RDONLY, None)


def loopback_up() -> None:
    """A new network namespace has only `lo`, and it is down; bring it up (local servers work)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifreq = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s, SIOCGIFFLAGS, ifreq))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))


def set_rlimits(limits: dict[str, int]) -> None:
    for name, value in limits.items():
        try:
            resource.setrlimit(RLIMITS[name], (value, value))
        except (OSError, ValueError) as e:
            fail(f"cannot set rlimit {name}={value}: {e}")


def drop_privileges(uid: int, gid: int) -> None:
    try:
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    except OSError as e:
        fail(f"cannot switch to uid {uid}: {e}")


def main() -> None:
    global _status_fd
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    _status_fd = spec["status_fd"]
    os.set_inheritable(_status_fd, False)
    join_cgroups(spec["cgroups"])
    if spec["mounts"]:
        rebuild_filesystem(spec)
    if spec["loopback"]:
        try:
            loopback_up()
        except OSError as e:
            fail(f"cannot bring loopback up: {e}")
    set_rlimits(spec["rlimits"])
    os.umask(0o022)
    if spec["uid"] is not None:
        drop_privileges(spec["uid"], spec["gid"])
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        fail("prctl(PR_SET_NO_NEW_PRIVS) failed")
    try:
        os.chdir(spec["cwd"])
    except OSError as e:
        fail(f"cannot enter working directory {spec['cwd']}: {e.strerror}")
    argv: list[str] = spec["argv"]
    env: dict[str, str] = spec["env"]
    os.write(_status_fd, b"ok\n")
    os.close(_status_fd)
    program = find_program(argv[0], env.get("PATH", ""))
    if program is None:
        os.write(2, f"{argv[0]}: command not found\n".encode())
        os._exit(127)
    try:
        os.execve(program, argv, env)
    except OSError as e:
        os.write(2, f"{argv[0]}: {e.strerror}\n".encode())
        os._exit(126)


def find_program(name: str, path: str) -> str | None:
    """Resolve like a shell, as the sandbox user (after the uid switch, the stdlib may be out
    of reach, so nothing here may import lazily: no os.execvpe, no shutil.which)."""
    if "/" in name:
        return name
    for directory in path.split(":"):
        candidate = os.path.join(directory or ".", name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


if __name__ == "__main__":
    main()
