"""The first program inside a local sandbox: set the process up, then exec the command.

`local.py` starts `unshare --pid --net --mount ... python -I -S _init.py SPEC_JSON`. This script
runs as root (where the host allows) inside the fresh namespaces, and in this order:

1. joins the per-process cgroups (pids, memory) prepared by the host, before anything can fork;
2. rebuilds the visible filesystem: private tmpfs over /tmp-like directories and over ancestors
   that the sandbox user could not traverse, re-exposes the sandbox root and the read-only paths
   from file descriptors opened beforehand, remounts the read-only ones read-only, then covers
   every hidden path with an empty read-only tmpfs (or /dev/null for a file);
3. brings the namespace's loopback up, then forks: it stays as the namespace's init
   (`supervise`) while the child sets rlimits, drops to the sandbox uid/gid with no_new_privs
   (so the mounts above cannot be undone and no setuid binary helps), chdirs and execs the
   command with exactly the environment it was given.

It must stay standalone (stdlib only, no toolkit import, and cheap imports: no typing, json or
socket, each of which costs 8-20 ms at every start): it starts before the hidden paths are
hidden and may run where the toolkit is not importable by the sandbox user. Failures of the set-up
are the sandbox breaking: they exit with status 125 and write a line starting
`ari-sandbox:` on the status pipe, which the host turns into a SandboxError (a working
directory that does not exist counts as set-up: the caller asked for it). A command that
cannot be found or run exits 127/126 like a shell does: that is the command's result, not a
broken sandbox.
"""

from __future__ import annotations

import _signal
import _socket
import ctypes
import fcntl
import marshal
import os
import resource
import stat
import struct
import sys

SETUP_FAILED = 125
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36
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


def rebuild_filesystem(
    expose: list[str], readonly: list[str], shadow: list[str], hide: list[str], tmpfs_size: str
) -> None:

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
    s = _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM)
    try:
        ifreq = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s.fileno(), SIOCGIFFLAGS, ifreq))[1]
        fcntl.ioctl(s.fileno(), SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))
    finally:
        s.close()


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
    with open(sys.argv[1], "rb") as f:
        spec = marshal.load(f)
    _status_fd = spec["status_fd"]
    os.set_inheritable(_status_fd, False)
    join_cgroups(spec["cgroups"])
    if spec["mounts"]:
        rebuild_filesystem(
            spec["expose"], spec["readonly"], spec["shadow"], spec["hide"], spec["tmpfs_size"]
        )
    if spec["loopback"]:
        try:
            loopback_up()
        except OSError as e:
            fail(f"cannot bring loopback up: {e}")
    # Orphans of the command re-parent to this process, not to the host's init: so without a
    # PID namespace too, every process of the tree stays findable as our descendant.
    if _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        fail("prctl(PR_SET_CHILD_SUBREAPER) failed")
    child = os.fork()
    if child == 0:
        run_command(spec)
    supervise(child, kill_rest=not spec["pidns"])


def supervise(child: int, kill_rest: bool) -> None:
    """Stay as the namespace's init: reap orphans, and report the command's own exit status.

    The command must not be PID 1 itself: PID 1 ignores signals it has no handler for, even
    SIGKILL from inside, so `kill $$` or a default SIGTERM would not work as usual. And a command
    killed by a signal is reported on the status pipe as -signal (PID 1 cannot kill itself to
    pass the signal on). When this process exits the kernel kills the rest of the namespace;
    without a namespace (`kill_rest`), it kills what is left of the tree itself first.
    """
    devnull = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):  # only the command holds the host's pipes: EOF means it is gone
        os.dup2(devnull, fd)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(SETUP_FAILED)
        except InterruptedError:
            continue
        if pid != child:
            continue
        code = os.waitstatus_to_exitcode(status)
        if kill_rest:
            kill_descendants()
        try:
            os.write(_status_fd, f"exit {code}\n".encode())
        except OSError:  # the host is gone: nobody left to tell
            os._exit(SETUP_FAILED)
        os._exit(code if code >= 0 else 128 - code)


def descendants(pid: int) -> list[int]:
    """Live (non-zombie) descendants of `pid`, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != b"Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    found: list[int] = []
    todo = [pid]
    while todo:
        for kid in children.get(todo.pop(), []):
            found.append(kid)
            todo.append(kid)
    return found


def kill_descendants() -> None:
    """SIGKILL the rest of the tree until none is left (as subreaper, we inherit orphans)."""
    for _ in range(1000):
        alive = descendants(os.getpid())
        if not alive:
            return
        for pid in alive:
            try:  # noqa: SIM105 (contextlib costs milliseconds of import at every start)
                os.kill(pid, 9)
            except OSError:
                pass
        while True:  # reap what died, so it stops showing up
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break


def run_command(spec: dict[str, object]) -> None:
    """In the forked child: limits, the uid switch, then exec (never returns)."""
    set_rlimits(spec["rlimits"])  # type: ignore[arg-type]
    os.umask(0o022)
    for signum in (_signal.SIGPIPE, _signal.SIGXFSZ):  # Python ignores these; exec keeps that
        _signal.signal(signum, _signal.SIG_DFL)
    if spec["uid"] is not None:
        drop_privileges(spec["uid"], spec["gid"])  # type: ignore[arg-type]
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        fail("prctl(PR_SET_NO_NEW_PRIVS) failed")
    cwd = str(spec["cwd"])
    try:
        os.chdir(cwd)
    except OSError as e:
        fail(f"cannot enter working directory {cwd}: {e.strerror}")
    argv: list[str] = spec["argv"]  # type: ignore[assignment]
    env: dict[str, str] = spec["env"]  # type: ignore[assignment]
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
