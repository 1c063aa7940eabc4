"""The local backend: each process tree is a host process, isolated as far as the host allows.

Where the host allows it (root, or a user namespace; here: yes), every command gets its own
PID namespace (killing its first process kills the whole tree, setsid'd and double-forked
children included), network namespace (loopback only), IPC and UTS namespaces, and mount
namespace in which the whole host is read-only and only an allow-list of it is seen (the
system folders: everything else is covered by an empty tmpfs, `host-allowlist`): the root is
bound read-write, read-only paths (and the interpreter, where it lies outside the allow-list)
read-only, hidden paths are covered by an empty tmpfs (a hidden folder that holds the root or a
read-only path shows only those), and /tmp, /var/tmp, /dev/shm, /run (/run/lock, /var/lock)
and /dev/mqueue are private, size-capped and gone with the command (`layout.py` plans it,
`mounts.py` mounts it). An ephemeral root is an overlay whose writes go to those private
places (capped with them, gone with the command); other roots' capped folders (`capped.py`)
are detached from the tree's view. It sees nothing of the sandboxes beside it: its own
cgroup namespace with only its own cgroups in /sys/fs/cgroup, and the kernel's per-device
views (block, loop and network devices, /proc/diskstats, /sys/fs/*: `neighbours.py`)
covered. It joins per-tree pids and memory cgroups for the limits
that are set (where writable), gets rlimits, a seccomp filter that refuses the kernel keyrings and a
scrubbed environment, and runs as a uid/gid of its own (`uids`, claimed host-wide; `nobody`
where it cannot switch) with no_new_privs. Commands are started by
a fork server (`launcher.py`), one per sandbox. `isolation` lists what was in force; where the
host cannot, the backend falls back with a logged warning.

What the local backend does NOT isolate (recorded in `not_isolated`):

- reading the system folders (`layout.SYSTEM_FOLDERS`: /usr, /etc, /lib*, /bin, /sbin, /dev,
  /proc, /sys) wherever the sandbox user may read: everything else of the host is covered (the
  allow-list: `host-allowlist`), but data an operator keeps inside a system folder, or links
  into one with a hard link, is only hidden if the caller hides it (`hide`: the deny-list, a
  second layer);
- FIFOs and Unix sockets on the host outside the private places: a read-only mount does not
  stop opening them, so their permissions (and hiding their folders) must;
- the root's disk use, unless the root is ephemeral (`ephemeral_root`) or lies on a capped
  folder (`capped.cap_folder`): a plain host folder is capped per file (`file_size_bytes`),
  not in total;
- the kernel (no system call filter beyond the keyrings), CPU share (unless `Limits.cpus` sets
  a quota, each process tree's own, in a cgroup; `cpu_seconds` caps CPU
  time only), devices in /dev (GPUs stay reachable), the clock;
- sandboxes running at the same time: each runs as a uid of its own (no per-user counter of
  the kernel shared, no file notifications, the kernel's file counters masked); they cannot
  signal, see or write each other, but each may read another's root if it can reach it (keep
  roots under /tmp, which every sandbox sees as its own, or hide them), and timing, free
  memory, the task count and file locks on shared readable files (the system files, the
  interpreter) are covert channels between live sandboxes, measured in
  site/docs/security/channels.md (not persistence: nothing outlives a tree);
- without namespaces (non-root hosts without user namespaces): network, mounts, a read-only
  host, hidden and read-only paths, private places, IPC, the other sandboxes' cgroups, devices
  and processes (`neighbours`), and the uid (commands run as the
  caller); trees are still killed whole (the launcher is a subreaper), and keyrings refused;
- without writable cgroups (v1 as root; v2: a delegated subtree, or as root the toolkit's own
  top-level cgroup: see `cgroups`): the memory
  cap is per process (RLIMIT_AS), not per tree, and none at all where the commands may use
  CUDA (an address-space rlimit breaks it), the process cap is only RLIMIT_NPROC of the uid
  (not enforced at all for root), and a CPU quota is not enforced (`cpu-quota`).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import pwd
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO

from toolkit.sandbox import capped, neighbours, uids
from toolkit.sandbox.base import (
    NO_LIMITS,
    Egress,
    Limits,
    Sandbox,
    SandboxError,
    SandboxTeardownTimeout,
)
from toolkit.sandbox.files import read_under, write_under
from toolkit.sandbox.local import gpus as gpu_pinning
from toolkit.sandbox.local import host, layout
from toolkit.sandbox.local import process as process_module
from toolkit.sandbox.local.egress import EgressGate
from toolkit.sandbox.local.forkserver import ForkServer
from toolkit.sandbox.local.process import LocalProcess

log = logging.getLogger(__name__)

SETUP_TIMEOUT_S = 60.0
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PAGE_BYTES = 4096
SANDBOX_USER = "ari-sandbox"
"""USER and LOGNAME of a sandbox that runs as a uid of its own (it has no passwd entry)."""


def _sandbox_ids() -> tuple[int, int]:
    try:
        entry = pwd.getpwnam("nobody")
        return entry.pw_uid, entry.pw_gid
    except KeyError:
        return 65534, 65534


def _home() -> Path | None:
    try:
        return Path.home().resolve()
    except (RuntimeError, KeyError):
        return None


class _Trees:
    """The process trees of one sandbox: those starting (`cleanup` waits for them), those
    started and not yet settled (released at `cleanup`), and whether it is closed."""

    def __init__(self) -> None:
        self._state = threading.Condition()
        self._starting = 0
        self._processes: list[LocalProcess] = []
        self._closed = False

    @contextlib.contextmanager
    def starting(self) -> Iterator[None]:
        """While a tree starts; `SandboxError` once the sandbox is closed."""
        with self._state:
            if self._closed:
                raise SandboxError("sandbox was cleaned up; create a new one")
            self._starting += 1
        try:
            yield
        finally:
            with self._state:
                self._starting -= 1
                self._state.notify_all()

    def add(self, process: LocalProcess) -> None:
        with self._state:  # forget trees that are over (a run starts thousands); keep the rest
            self._processes = [p for p in self._processes if not p.settled] + [process]

    def close(self, timeout_s: float) -> list[LocalProcess]:
        """No more trees; those started, once the ones starting have (at most `timeout_s`)."""
        with self._state:
            self._closed = True
            self._state.wait_for(lambda: self._starting == 0, timeout=timeout_s)
            processes, self._processes = self._processes, []
        return processes


class LocalSandbox(Sandbox):
    """Sandbox whose processes run on this host (see the module docstring for what it covers)."""

    name = "local"

    def __init__(
        self,
        root: Path,
        *,
        network: bool = False,
        hide: Sequence[Path] = (),
        limits: Limits = NO_LIMITS,
        env: Mapping[str, str] | None = None,
        readonly: Sequence[Path] = (),
        egress: Sequence[Egress] = (),
        gpus: Sequence[str] | None = None,
        ephemeral_root: bool = False,
    ):
        self.support = host.probe()
        # GPU pinning (see gpus.py): the other GPUs' device nodes join the hidden paths.
        self.gpus = None if gpus is None else [str(g) for g in gpus]
        pinned = gpu_pinning.pin(self.gpus) if self.gpus is not None else gpu_pinning.GpuPin()
        hide = [*hide, *pinned.hide]
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise SandboxError(f"sandbox root {self.root} is not a directory; create it first")
        self.network = network
        self.limits = limits
        self.hide = [Path(p).resolve() for p in hide]
        self.readonly = [Path(p).resolve() for p in readonly]
        for path in self.readonly:
            if not path.exists():
                raise ValueError(f"read-only path {path} does not exist")
            if path == self.root:
                raise ValueError(f"{path} is both the sandbox root and a read-only path")
        for hidden in self.hide:
            if hidden == self.root or hidden in self.readonly:
                raise ValueError(f"{hidden} is both hidden and exposed in the sandbox")
        self.namespaces = self.support.namespaces
        self.userns = self.support.userns
        self.ephemeral_asked = ephemeral_root
        self.ephemeral = ephemeral_root and self.namespaces and self.support.overlay
        if ephemeral_root and not self.ephemeral:
            log.warning(
                "sandbox: this host cannot overlay %s: commands write to it directly", self.root
            )
        self.drop_uid = self.namespaces and self.support.is_root
        # A uid of its own (`uids`): per-user counters of the kernel are then its own too.
        self._uid_claim = uids.UidClaim(self.root) if self.drop_uid else None
        self.uid = self._uid_claim.uid if self._uid_claim else _sandbox_ids()[0]
        try:
            self._set_up(env, pinned.env, egress)
        except BaseException:
            self._release_uid()
            raise

    def _set_up(
        self, env: Mapping[str, str] | None, pinned_env: Mapping[str, str], egress: Sequence[Egress]
    ) -> None:
        """The rest of `__init__`, once the uid is claimed (given back if this fails)."""
        self.plan: dict[str, object] | None = None
        self.covers_home = False
        if self.namespaces:
            self.plan = self._plan()
        self.tmpdir = self.root / ".tmp"
        self.tmpdir.mkdir(exist_ok=True)
        if self.drop_uid:
            try:
                self._hand_over(self.root)
            except OSError as e:
                raise SandboxError(
                    f"cannot give {self.root} to the sandbox user {self.uid}: {e.strerror}; "
                    "put the sandbox root on a local filesystem that supports chown"
                ) from e
        self.base_env = {
            "PATH": f"{os.path.dirname(sys.executable)}:{DEFAULT_PATH}",
            "HOME": str(self.root),
            "LANG": "C.UTF-8",
            "TMPDIR": str(self.tmpdir),
            # A uid without a name: programs that ask for the user's name (getpass) ask these.
            **({"USER": SANDBOX_USER, "LOGNAME": SANDBOX_USER} if self._uid_claim else {}),
            **(env or {}),
            **pinned_env,
        }
        self.egress = list(egress)
        self._gate = self._egress_gate()
        self._server = ForkServer(userns=self.userns)
        self._trees = _Trees()
        self.isolation, self.not_isolated = self._describe()

    def _plan(self) -> dict[str, object]:
        """The filesystem every tree of this sandbox gets (`layout`), as the launcher's plan."""
        places = layout.private_places()
        home = _home()
        uid = self.uid if self.drop_uid else None
        outside, outside_files = layout.outside_allowlist(places)
        runtime = layout.runtime_paths(
            sorted({Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve()}),
            hide=self.hide,
            readonly=[*self.readonly, self.root],
            unseen=[p for p, _ in places.top] + ([home] if home else []) + outside,
            uid=uid,
        )
        system = layout.network_files(places) if self.network else []
        readonly = [*self.readonly, *(p for p in [*runtime, *system] if p != self.root)]
        exposed = [self.root, *readonly]
        hide = [*self.hide]
        hide += [f for f in outside_files if f not in hide and f not in exposed]
        # The kernel's views of the sandboxes beside this one (`neighbours`), unless the
        # caller exposes one of them itself.
        for view in map(Path, neighbours.masked_paths()):
            if view not in hide and not any(layout.is_within(e, view) for e in exposed):
                hide.append(view)
        fs = layout.layout(
            self.root,
            readonly=readonly,
            hide=hide,
            places=places,
            home=home,
            uid=uid,
            outside=outside,
        )
        self.covers_home = fs.covers_home
        how = "setattr" if self.support.mount_setattr else "remount"
        plan = fs.plan(
            places,
            self._place_options(),
            how,
            ephemeral=self.root if self.ephemeral else None,
            overlay_options=host.OVERLAY_USERNS if self.userns else "",
        )
        plan["cgroup_view"] = True  # /sys/fs/cgroup: the tree's own cgroups only
        # Host-wide counters programs read, as files of fixed text (`neighbours.NEUTRAL`).
        plan["neutral"] = [list(view) for view in neighbours.neutral_views()]
        plan["caps"] = {"tmpfs_source": capped.TMPFS_SOURCE, "image_suffix": capped.IMAGE_SUFFIX}
        return plan

    def _place_options(self) -> str:
        """tmpfs options of the private places: `disk_bytes` in total (whole pages; inodes
        capped too, so empty files cannot eat kernel memory), else the memory cap, else a
        quarter of the RAM."""
        lim = self.limits
        if lim.disk_bytes is not None:
            size = max(lim.disk_bytes, 1)
            return f"size={size},nr_inodes={max(1024, size // PAGE_BYTES)}"
        if lim.memory_bytes is not None:
            return f"size={lim.memory_bytes}"
        return "size=25%"

    # -- description ---------------------------------------------------------------------
    def _describe(self) -> tuple[list[str], list[str]]:
        s, lim = self.support, self.limits
        on = ["pgroup", "subreaper", "scrubbed-env"]
        off = ["kernel", "devices"]
        if lim.cpus is None:
            off.append("cpu-share")  # no quota asked: the tree competes for every core
        elif s.cpu_parent is not None:
            on.append("cgroup-cpu")
        else:
            off.append("cpu-quota")
        if self.namespaces:
            on += ["pidns", "mountns", "ipcns", "utsns", "private-tmp", "host-filesystem-readonly"]
            on.append("neighbours-masked")  # no other sandbox's cgroup, device or counters
            on += ["cgroupns"] if os.path.exists("/proc/self/ns/cgroup") else []
            on.append("host-allowlist")  # only the system folders and the sandbox's own paths
            off.append("system-folders-readable")  # those stay readable where permissions allow
            on += ["userns"] if self.userns else []
            on += ["private-home"] if self.covers_home else []
            on += ["hidden-paths"] if self.hide else []
            on += ["readonly-paths"] if self.readonly else []
            on += [] if self.network else ["netns"]
            on += ["disk-cap"] if lim.disk_bytes is not None else []
        else:
            off += ["host-filesystem-readable", "host-allowlist"]
            off += ["host-filesystem-writable", "mounts", "hidden-paths", "readonly-paths"]
            off += ["private-tmp", "ipc", "uts", "neighbours"]
            off += [] if self.network else ["network"]
            off += ["disk"] if lim.disk_bytes is not None else []
        if self.ephemeral:
            on.append("ephemeral-root")  # its writes go to the capped places, then vanish
        elif capped.capped_size(self.root) is not None:
            on.append("root-disk-cap")  # the root is a filesystem of its own, of fixed size
        else:
            off.append("root-disk")  # the caller's folder on the host's disk: capped per file
        off += ["ephemeral-root"] if self.ephemeral_asked and not self.ephemeral else []
        if self.network:
            off.append("network")
        if self.gpus is not None and self.namespaces:
            on.append("gpu-pinned")
        elif self.gpus is not None:
            off.append("gpus")  # without mounts only the environment selects the GPUs
        on += ["no-keyrings", "no-file-notify"] if s.keyring_filter else []
        off += [] if s.keyring_filter else ["keyrings", "file-notify"]
        if self.egress:
            (on if self._gate is not None else off).append("egress-allowlist")
        on += ["cgroup-pids"] if s.pids_parent and lim.max_processes is not None else []
        on += ["cgroup-memory"] if s.memory_parent and lim.memory_bytes is not None else []
        in_cgroup = {"cgroup-pids", "cgroup-memory", "cgroup-cpu"} & set(on)
        on += ["cgroup2"] if s.cgroup2 and in_cgroup else []  # which cgroup version
        if lim.memory_bytes is not None and not s.memory_parent:
            off.append("memory-per-tree")
            off += [] if "as" in self._rlimits() else ["memory"]  # not even per process
        if lim.max_processes is not None and not s.pids_parent and not self.drop_uid:
            off.append("process-count")
        if set(self._rlimits()) - {"core"}:
            on.append("rlimits")
        on.append("no-new-privs")
        if self._uid_claim is not None:
            on.append("uid:own")  # a uid of its own, claimed host-wide (`uids`)
        elif self.drop_uid:
            on.append(f"uid:{self._user_name()}")
        else:
            off.append("uid")  # commands run as the caller's own uid on the host
        return sorted(set(on)), sorted(set(off))

    @property
    def gid(self) -> int:
        """A claimed uid's group has its number; else `nobody`'s group."""
        return self.uid if self._uid_claim is not None else _sandbox_ids()[1]

    def _release_uid(self) -> None:
        if self._uid_claim is not None:
            self._uid_claim.release()

    def _user_name(self) -> str:
        try:
            return pwd.getpwuid(self.uid).pw_name
        except KeyError:
            return str(self.uid)

    def _hand_over(self, path: Path) -> None:
        """Give the sandbox user the root's files, so it can work in its own directory.

        Walked by descriptor, never through a symlink: a sandbox already working in this root
        (a runner, when the controller is made) must not get root to chown a link's target by
        swapping a folder for a link mid-walk.
        """
        os.chown(path, self.uid, self.gid, follow_symlinks=False)
        for _, dirnames, filenames, dir_fd in os.fwalk(path, follow_symlinks=False):
            for name in dirnames + filenames:
                os.chown(name, self.uid, self.gid, dir_fd=dir_fd, follow_symlinks=False)

    # -- egress --------------------------------------------------------------------------
    def _egress_gate(self) -> EgressGate | None:
        """The allow-list's host side, where there are network namespaces to apply it in.

        Without them the sandbox has the host's network as it is (recorded: `network` and
        `egress-allowlist` in not_isolated)."""
        if not self.egress:
            return None
        if self.network:
            raise ValueError("egress is for sandboxes without network (network=False)")
        if not self.namespaces:
            log.warning("sandbox: no network namespaces here: egress allow-list not enforced")
            return None
        return EgressGate(self.egress)

    @property
    def egress_log(self) -> list[dict[str, object]]:
        return self._gate.log if self._gate is not None else []

    # -- spawning ------------------------------------------------------------------------
    def _rlimits(self) -> dict[str, int]:
        lim, s = self.limits, self.support
        out = {"core": 0}
        if lim.cpu_seconds is not None:
            out["cpu"] = lim.cpu_seconds
        if lim.file_size_bytes is not None:
            out["fsize"] = lim.file_size_bytes
        if lim.memory_bytes is not None and s.memory_parent is None and not self._may_use_cuda:
            out["as"] = lim.memory_bytes  # never with CUDA: its address-space reservations fail
        if lim.max_processes is not None and s.pids_parent is None and self.drop_uid:
            out["nproc"] = lim.max_processes
        return out

    @functools.cached_property
    def _may_use_cuda(self) -> bool:
        """Whether commands here may reach a GPU: pinned to some, or not denied the host's."""
        if self.gpus is not None:
            return bool(self.gpus)
        return bool(gpu_pinning.host_gpu_ids())

    def _spawn(
        self, argv: list[str], cwd: str | None, env: dict[str, str] | None, streams: list[bool]
    ) -> LocalProcess:
        """Launch `argv`; `streams` says which of stdin/stdout/stderr become host pipes."""
        if not argv:
            raise ValueError("argv must name a command")
        workdir = Path(cwd) if cwd is not None else self.root
        if not workdir.is_absolute():
            workdir = self.root / workdir
        spec: dict[str, object] = {
            "pidns": self.namespaces,
            "userns": self.userns,
            "network": self.network,
            "filesystem": self.plan,
            "loopback": self.namespaces and not self.network,
            "keyrings": self.support.keyring_filter,
            "rlimits": self._rlimits(),
            "egress": self._gate.launcher_spec() if self._gate is not None else None,
            "uid": self.uid if self.drop_uid else None,
            "gid": self.gid if self.drop_uid else None,
            "cwd": str(workdir),
            "argv": argv,
            "env": {**self.base_env, **(env or {})},
        }
        with self._trees.starting():
            return self._launch(spec, streams)

    def _launch(self, spec: dict[str, object], streams: list[bool]) -> LocalProcess:
        lim = self.limits
        cgroups = host.ProcessCgroups(self.support, lim.memory_bytes, lim.max_processes, lim.cpus)
        spec["cgroups"] = cgroups.procs_files
        theirs: list[int] = []
        ours: list[IO[bytes] | None] = []
        for index, wanted in enumerate(streams):
            if not wanted:
                theirs.append(os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC))
                ours.append(None)
                continue
            read_end, write_end = os.pipe2(os.O_CLOEXEC)
            theirs.append(read_end if index == 0 else write_end)
            host_end = write_end if index == 0 else read_end
            ours.append(os.fdopen(host_end, "wb" if index == 0 else "rb"))
        status_r, status_w = os.pipe2(os.O_CLOEXEC)
        process = LocalProcess(cgroups, status_r, *ours)
        try:
            pid, pidfd = self._server.launch(spec, [*theirs, status_w])
        except BaseException:
            for stream in ours:
                if stream is not None:
                    stream.close()
            os.close(status_r)
            cgroups.remove()
            raise
        finally:
            for fd in [*theirs, status_w]:
                os.close(fd)
        process.adopt(pid, pidfd)
        self._trees.add(process)
        process.await_setup(SETUP_TIMEOUT_S)
        return process

    # -- interface -----------------------------------------------------------------------
    def _output_cap(self) -> int:
        return process_module.MAX_OUTPUT_BYTES  # read at each call (tests lower it)

    def read_file(self, path: str) -> bytes:
        return read_under(self.root, path)

    def write_file(self, path: str, data: bytes) -> None:
        owner = (self.uid, self.gid) if self.drop_uid else None
        write_under(self.root, path, data, owner)

    def cleanup(self) -> None:
        errors: list[SandboxError] = []
        # Commands being started finish starting first, then die with the rest.
        for process in self._trees.close(timeout_s=SETUP_TIMEOUT_S * 2):
            try:
                process.release()
            except SandboxError as e:
                errors.append(e)
        self._server.close()
        if self._gate is not None:
            self._gate.close()
        if not errors:  # a tree too slow to die may still hold the uid: never hand it on
            self._release_uid()
        if errors:  # only trees too slow to die: still that kind of error (see its docstring)
            slow = all(isinstance(e, SandboxTeardownTimeout) for e in errors)
            kind = SandboxTeardownTimeout if slow else SandboxError
            raise kind("; ".join(str(e) for e in errors))


def create(
    root: Path,
    *,
    network: bool,
    hide: Sequence[Path],
    limits: Limits,
    env: Mapping[str, str] | None,
    readonly: Sequence[Path],
    egress: Sequence[Egress],
    gpus: Sequence[str] | None,
    image: str | None,
    ephemeral_root: bool,
) -> LocalSandbox:
    """The local backend's `SandboxFactory`: `image` names a container image, which a sandbox
    on this host has none of, so it is not used."""
    del image
    return LocalSandbox(
        root,
        network=network,
        hide=hide,
        limits=limits,
        env=env,
        readonly=readonly,
        egress=egress,
        gpus=gpus,
        ephemeral_root=ephemeral_root,
    )
