"""The local backend's launcher: a small fork server that starts every sandboxed process.

`sandbox.py` starts it once per sandbox (`python -I -S launcher.py FD MODE`, as root where the
host allows; for another user, it first makes itself root of a user namespace) and sends it one
message per command over a Unix socketpair: the spec (marshal) and four file descriptors (the
command's stdin, stdout, stderr and a status pipe). It answers with the new tree's pid and a
pidfd. Forking this already-running, single-threaded process costs about a millisecond;
starting a fresh Python for every command cost 20-60 ms. Per command:

1. The server unshares a new PID namespace for its next child and forks it: that child `init`
   is PID 1 there, and is what the host kills (its death ends the namespace). It starts its
   own session, joins the per-process cgroups (pids, memory) prepared by the host before
   anything can fork, and unshares new mount, IPC (SysV objects, POSIX message queues) and UTS
   namespaces, and a network namespace unless the sandbox has network, and a cgroup namespace
   rooted at its own cgroups.
2. It builds the visible filesystem from the host's plan (`mounts.py`): the host read-only,
   a fresh /proc, one capped tmpfs for the private writable places, covers, the sandbox root
   and read-only paths bound back in, its own cgroups alone in /sys/fs/cgroup, hidden paths
   (the kernel's views of other sandboxes among them) covered. It brings loopback up.
3. It forks the command and stays as init (`supervise`): it reaps orphans and reports the
   command's exit status once nothing else is left. The command sets rlimits, drops to the
   sandbox uid/gid with no_new_privs (or, not root, locks the mounts in a user namespace of its
   own), installs the keyring filter (`seccomp.py`), chdirs and execs with exactly the
   environment it was given.

Without namespaces (non-root hosts without user namespaces) the same chain runs with `init` as
a subreaper, so escaped orphans stay its descendants and are killed with it.

It must stay standalone (stdlib, its sibling modules `mounts`, `seccomp` and the shared
`../mountinfo.py` only): it runs as
root with `-I -S`. And everything the children use must be imported before they fork: after
the uid switch the stdlib may be out of reach (pyenv under /root), so nothing may import
lazily there. Set-up
failures are the sandbox breaking: a line starting `ari-sandbox:` on the status pipe, which the
host turns into a SandboxError (a working directory that does not exist counts as set-up: the
caller asked for it). A command that cannot be found or run exits 127/126 like a shell does:
that is the command's result, not a broken sandbox.
"""

from __future__ import annotations

import ctypes
import fcntl
import marshal
import os
import resource
import select
import signal
import socket
import struct
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING or __package__:  # imported by the host side (process.py)
    from toolkit.sandbox.local import mounts, seccomp
else:  # run as a script with -I -S: its siblings, by path, like itself, and the shared
    # stdlib-only helper `mountinfo.py` one folder up (which `mounts` imports)
    _HERE = os.path.dirname(os.path.abspath(__file__))
    sys.path[:0] = [_HERE, os.path.dirname(_HERE)]
    import mounts
    import seccomp

SETUP_FAILED = 125
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36
CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MAX_SPEC_BYTES = 1 << 20
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
KEYRING_FILTER = seccomp.program()
_egress_handoff: socket.socket | None = None  # held by init while its tree lives
_status_fd = -1  # the host reads "pid N", then "ok" (about to exec) or the failure, then "exit N"


def fail(what: str) -> None:
    line = f"ari-sandbox: {what}\n".encode()
    try:
        os.write(_status_fd, line)
    except OSError:
        os.write(2, line)
    os._exit(SETUP_FAILED)


def join_cgroups(procs_files: list[str]) -> None:
    for path in procs_files:
        try:
            with open(path, "w") as f:
                f.write("0")
        except OSError as e:
            fail(f"cannot join cgroup {path}: {e}")


def loopback_up() -> None:
    """A new network namespace has only `lo`, and it is down; bring it up (local servers work)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifreq = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s.fileno(), SIOCGIFFLAGS, ifreq))[1]
        fcntl.ioctl(s.fileno(), SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))


def set_rlimits(limits: dict[str, int]) -> None:
    for name, value in limits.items():
        try:
            resource.setrlimit(RLIMITS[name], (value, value))
        except (OSError, ValueError) as e:
            fail(f"cannot set rlimit {name}={value}: {e}")


def map_ids(outer_uid: int, outer_gid: int, inner: int = 0) -> None:
    """Map our own ids into the user namespace just made (all an unprivileged user may)."""
    try:
        with open("/proc/self/setgroups", "w") as f:
            f.write("deny")
        with open("/proc/self/uid_map", "w") as f:
            f.write(f"{inner} {outer_uid} 1")
        with open("/proc/self/gid_map", "w") as f:
            f.write(f"{inner} {outer_gid} 1")
    except OSError as e:
        fail(f"cannot map ids in the user namespace: {e}")


def lock_mounts() -> None:
    """Without a uid switch (not root), make the mounts above impossible to undo instead.

    A mount namespace owned by a new, less privileged user namespace receives the mounts as
    locked: they cannot be unmounted to reveal what they cover, nor remounted read-write. The
    command is `nobody` in it (as with root hosts), so exec leaves it no capabilities at all.
    """
    outer_uid, outer_gid = os.getuid(), os.getgid()
    if _libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
        fail(f"cannot lock the mounts (unshare): {os.strerror(ctypes.get_errno())}")
    map_ids(outer_uid, outer_gid, inner=65534)


def drop_privileges(uid: int, gid: int) -> None:
    try:
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    except OSError as e:
        fail(f"cannot switch to uid {uid}: {e}")


def serve(sock_fd: int, userns: bool) -> None:
    """Fork one process tree per message until the host closes its end; then kill what is left.

    Each request is answered with the new tree's pid and a pidfd for it (so the host can wait
    for it and signal it without any race on pid reuse), or with an error line.
    """
    if userns:
        become_namespace_root()
    sock = socket.socket(fileno=sock_fd)
    own_pidns = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    children: set[int] = set()
    while True:
        ready, _, _ = select.select([sock], [], [], 1.0)
        while children:  # reap finished trees: they are our children
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            children.discard(pid)
        if not ready:
            continue
        try:
            data, ancdata, _, _ = sock.recvmsg(MAX_SPEC_BYTES, socket.CMSG_SPACE(4 * 4))
        except OSError:
            data, ancdata = b"", []
        fds: list[int] = []
        for level, kind, payload in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                usable = len(payload) - len(payload) % 4
                fds += struct.unpack(f"{usable // 4}i", payload[:usable])
        if not data:  # the host is gone (or closed us): nothing may outlive it
            if os.getpid() != 1:  # as PID 1 (not root), our exit ends every tree by itself
                for pid in children:
                    kill_tree(pid)
            os._exit(0)
        spec = marshal.loads(data)
        # A new PID namespace for the next child only: it will be PID 1 there. (unshare may
        # do that only once while the children's namespace differs from ours: reset it first.)
        if spec["pidns"] and (
            _libc.setns(own_pidns, CLONE_NEWPID) != 0 or _libc.unshare(CLONE_NEWPID) != 0
        ):
            reply(sock, f"error: unshare failed: {os.strerror(ctypes.get_errno())}", None)
        else:
            pid = os.fork()
            if pid == 0:
                try:
                    sock.close()
                    os.close(own_pidns)
                    init(spec, fds)
                except BaseException as e:  # a launcher bug: say so on the status pipe
                    fail(f"launcher error: {e!r}")
                finally:
                    os._exit(SETUP_FAILED)
            children.add(pid)
            reply(sock, str(pid), os.pidfd_open(pid))
        for fd in fds:
            os.close(fd)


def become_namespace_root() -> None:
    """Not root: serve from inside a user namespace of our own, as PID 1 of a PID namespace it
    owns. There the server may mount, and may make a new PID namespace for every tree (setns
    back to our own PID namespace first needs privilege over it, which we now have)."""
    outer_uid, outer_gid = os.getuid(), os.getgid()
    if _libc.unshare(CLONE_NEWUSER | CLONE_NEWPID) != 0:
        reason = os.strerror(ctypes.get_errno())
        sys.exit(f"ari-sandbox: cannot make a user namespace: {reason}")
    map_ids(outer_uid, outer_gid)
    server = os.fork()
    if server == 0:
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        return  # PID 1 of the new namespace: its death ends every tree of this sandbox
    while True:
        try:
            _, status = os.waitpid(server, 0)
        except InterruptedError:
            continue
        os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def reply(sock: socket.socket, text: str, pidfd: int | None) -> None:
    rights = (
        [] if pidfd is None else [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", pidfd))]
    )
    try:  # noqa: SIM105
        sock.sendmsg([text.encode()], rights)
    except OSError:
        pass  # the host is gone: the next recvmsg says so
    if pidfd is not None:
        os.close(pidfd)


def init(spec: dict[str, object], fds: list[int]) -> None:
    """The tree's first process, PID 1 of its namespace: session, cgroups, namespaces, the
    filesystem; then it forks the command and supervises it (never returns)."""
    global _status_fd
    _status_fd = fds[-1]
    stdin, stdout, stderr = fds[:3]
    os.set_inheritable(_status_fd, False)
    # Not dumpable: the command (same host uid without root) cannot ptrace us or read our
    # descriptors; its capability-less state already denies that, this holds regardless.
    _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    os.setsid()
    for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, signal.SIG_DFL)
    for fd, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
        os.dup2(fd, target)
    for fd in {stdin, stdout, stderr}:
        if fd > 2:
            os.close(fd)
    join_cgroups(spec["cgroups"])  # type: ignore[arg-type]
    egress = spec.get("egress")  # an allow-list: set up in two steps around the filesystem
    prepared = None
    if spec["filesystem"] is not None:
        # Own mounts, SysV IPC and POSIX message queues, hostname; network unless allowed.
        # And its own cgroup namespace, rooted at the cgroups it just joined: /proc/self/cgroup
        # names no host path, and /sys/fs/cgroup is mounted afresh from there (`mounts`).
        flags = CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS
        flags |= 0 if spec["network"] else CLONE_NEWNET
        cgroupns = _libc.unshare(flags | CLONE_NEWCGROUP) == 0
        if not cgroupns and _libc.unshare(flags) != 0:  # a kernel before 4.6: no cgroupns
            fail(f"unshare failed: {os.strerror(ctypes.get_errno())}")
        try:
            mounts.mount(None, "/", None, MS_REC | MS_PRIVATE, None)  # nothing propagates
            if egress:  # its files are opened here: in this namespace, before /tmp is private
                prepared = egress_prepare(egress)  # type: ignore[arg-type]
            mounts.build(spec["filesystem"], spec["cgroups"], cgroupns)  # type: ignore[arg-type]
        except mounts.SetupError as e:
            fail(str(e))
    if spec["loopback"]:
        try:
            loopback_up()
        except OSError as e:
            fail(f"cannot bring loopback up: {e}")
    if egress and prepared:
        egress_start(egress, prepared, spec["filesystem"])  # type: ignore[arg-type]
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
    pass the signal on). Before reporting, it kills and reaps whatever the command left (in
    the namespace, or, without one (`kill_rest`), among its descendants).
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
        else:
            end_namespace()
        try:
            os.write(_status_fd, f"exit {code}\n".encode())
        except OSError:  # the host is gone: nobody left to tell
            os._exit(SETUP_FAILED)
        os._exit(code if code >= 0 else 128 - code)


def zombie(pid: int | str, state: bytes) -> bool:
    """Whether a process whose /proc state is `state` is dead. A "Z" leader whose other threads
    still run (its main thread called pthread_exit) is not: it has children, and lives on."""
    if state != b"Z":
        return False
    try:
        return len(os.listdir(f"/proc/{pid}/task")) <= 1
    except OSError:
        return True


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
        if not zombie(entry, fields[0]):
            children.setdefault(int(fields[1]), []).append(int(entry))
    found: list[int] = []
    todo = [pid]
    while todo:
        for kid in children.get(todo.pop(), []):
            found.append(kid)
            todo.append(kid)
    return found


def end_namespace() -> None:
    """As PID 1: kill every other process of the namespace and reap them all.

    Only then is "exit N" written, so the host may take the tree as gone without waiting
    for the namespace teardown (a fork racing with kill(-1) fails: its parent has SIGKILL
    pending). Once wait() says ECHILD, nothing but this process is left in the namespace.
    """
    while True:
        try:  # noqa: SIM105
            os.kill(-1, signal.SIGKILL)  # everyone we may signal here, except PID 1 (us)
        except OSError:
            pass
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
        except InterruptedError:
            continue


def kill_tree(pid: int) -> None:
    """SIGKILL a launch (A) and everything under it, escaped orphans included."""
    for _ in range(1000):
        alive = descendants(pid)
        if not alive:
            break
        for child in alive:
            try:  # noqa: SIM105
                os.kill(child, signal.SIGKILL)
            except OSError:
                pass
    try:  # noqa: SIM105
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def kill_descendants() -> None:
    """SIGKILL the rest of the tree until none is left (as subreaper, we inherit orphans)."""
    for _ in range(1000):
        alive = descendants(os.getpid())
        if not alive:
            return
        for pid in alive:
            try:  # noqa: SIM105
                os.kill(pid, 9)
            except OSError:
                pass
        while True:  # reap what died, so it stops showing up
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break


def prefer_for_oom_kill() -> None:
    """Out of memory, the kernel kills sandboxed code first, never the harness (a harness that
    dies makes its run `invalid`: sandboxed code must not be able to bring that about). Set
    before the uid switch: where the launcher holds CAP_SYS_RESOURCE (root on a host), the
    command cannot lower it again. Best effort."""
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass


def run_command(spec: dict[str, object]) -> None:
    """In the forked child: limits, the uid switch, then exec (never returns)."""
    _libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # init is not; the command is an ordinary process
    set_rlimits(spec["rlimits"])  # type: ignore[arg-type]
    prefer_for_oom_kill()
    os.umask(0o022)
    for signum in (signal.SIGPIPE, signal.SIGXFSZ):  # Python ignores these; exec keeps that
        signal.signal(signum, signal.SIG_DFL)
    if spec["uid"] is not None:
        drop_privileges(spec["uid"], spec["gid"])  # type: ignore[arg-type]
    if spec["userns"]:
        lock_mounts()
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        fail("prctl(PR_SET_NO_NEW_PRIVS) failed")
    if spec["keyrings"]:
        try:
            seccomp.install(KEYRING_FILTER)  # type: ignore[arg-type]
        except OSError as e:
            fail(str(e))
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


# -- egress allow-list (see egress.py beside it for the host side) ---------------------------------
RTM_NEWROUTE = 24
NLM_F_REQUEST, NLM_F_ACK, NLM_F_REPLACE, NLM_F_CREATE = 0x1, 0x4, 0x100, 0x400
NLMSG_ERROR = 2
RT_TABLE_LOCAL, RTPROT_BOOT, RT_SCOPE_HOST, RTN_LOCAL, RTA_OIF = 255, 3, 254, 2, 4
ETH_P_ALL = 0x0003
EGRESS_ACK_TIMEOUT_S = 30.0


def egress_prepare(plan: dict[str, object]) -> tuple[socket.socket, int, int]:
    """Before the filesystem is rebuilt (the host folder is still in view): connect to the
    host's hand-off socket and open the private hosts and resolv.conf files."""
    handoff = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        handoff.connect(str(plan["handoff"]))
        hosts = os.open(str(plan["hosts"]), os.O_PATH | os.O_CLOEXEC)
        resolv = os.open(str(plan["resolv"]), os.O_PATH | os.O_CLOEXEC)
    except OSError as e:
        fail(f"cannot reach the egress gate: {e}")
    return handoff, hosts, resolv


def route_everything_locally(family: int) -> None:
    """Make every address of `family` local to this namespace ("AnyIP" on `lo`): a connection to
    anything but a listener is then refused at once (and seen by the host), not left to time
    out or fail unseen with 'network unreachable'."""
    rtmsg = struct.pack(
        "BBBBBBBBI", family, 0, 0, 0, RT_TABLE_LOCAL, RTPROT_BOOT, RT_SCOPE_HOST, RTN_LOCAL, 0
    )
    oif = struct.pack("HHi", 8, RTA_OIF, socket.if_nametoindex("lo"))
    flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE
    body = rtmsg + oif
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0) as nl:
        nl.send(struct.pack("IHHII", 16 + len(body), RTM_NEWROUTE, flags, 1, 0) + body)
        reply = nl.recv(4096)
    kind = struct.unpack_from("H", reply, 4)[0]
    error = struct.unpack_from("i", reply, 16)[0] if kind == NLMSG_ERROR else 0
    if error:
        raise OSError(-error, os.strerror(-error))


def egress_start(
    plan: dict[str, object],
    prepared: tuple[socket.socket, int, int],
    filesystem: dict[str, object],
) -> None:
    """After loopback is up: route every address to it, put the private /etc/hosts and
    /etc/resolv.conf in place, create the namespace's listeners (one per allowed destination),
    its DNS socket and a packet socket on `lo`, and hand them all to the host, keeping none.

    The command then finds its allowed names at their loopback addresses; the host accepts on
    the listeners and relays, answers DNS and logs what the packet socket sees refused."""
    handoff, hosts, resolv = prepared
    try:
        route_everything_locally(socket.AF_INET)
    except OSError as e:
        fail(f"cannot route addresses to loopback: {e}")
    try:  # noqa: SIM105
        route_everything_locally(socket.AF_INET6)
    except OSError:
        pass  # no IPv6 in this namespace: such connections fail at once anyway (unlogged)
    for fd, target in ((hosts, "/etc/hosts"), (resolv, "/etc/resolv.conf")):
        # The host's own file, wherever its symlinks lead (they are the host's, not the
        # command's: nothing of the tree has run yet). Absent (e.g. under the private /run):
        # the resolver's defaults already point at 127.0.0.1.
        real = os.path.realpath(target)
        try:
            if os.path.isfile(real):
                mounts.bind(fd, real, readonly=True, how=str(filesystem["host_readonly"]))
        except mounts.SetupError as e:
            fail(f"cannot put the private {target} in place: {e}")
        os.close(fd)
    made: list[socket.socket] = []
    try:
        for address, port in plan["listen"]:  # type: ignore[attr-defined]
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            made.append(listener)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((address, port))
            listener.listen(128)
        dns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        made.append(dns)
        dns.bind((str(plan["dns"]), 53))
        sniffer = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        made.append(sniffer)
        sniffer.bind(("lo", 0))
        fds = struct.pack(f"{len(made)}i", *(s.fileno() for s in made))
        handoff.sendmsg([b"sockets"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
        ready, _, _ = select.select([handoff], [], [], EGRESS_ACK_TIMEOUT_S)
        if not ready or handoff.recv(1) != b"k":
            fail("the egress gate did not take the sockets")
    except OSError as e:
        fail(f"cannot set up the egress listeners: {e}")
    for made_socket in made:
        made_socket.close()
    # `handoff` stays open in this init (never in the command: it is close-on-exec) until the
    # tree ends: its end of file tells the host to close this tree's sockets.
    global _egress_handoff
    _egress_handoff = handoff


if __name__ == "__main__":
    serve(int(sys.argv[1]), userns=sys.argv[2] == "userns")
