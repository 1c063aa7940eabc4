"""The kernel's views of the sandboxes beside this one: what every backend masks (issue #38).

Sandboxes on one host share a kernel, and the kernel publishes per-cgroup, per-device and
per-filesystem counters to anyone who can read /sys and /proc. From them one sandbox read
another's memory high-water mark (the cgroup tree), learnt which runs were live and how much
they wrote (the loop devices' `backing_file` and stats, ext4's per-device counters), and
watched other runs' traffic (the host's network devices). Every run of a track is graded on
the same exam, so what one run learns of another's grading is its own exam.

Both backends therefore give a sandbox:

- its own cgroup only: a cgroup namespace rooted at the tree's own cgroups, and
  /sys/fs/cgroup replaced by those alone (local: `local/mounts.py`; docker: `cgroupns`);
- none of the views listed by `masked_paths`: every block device (the class, the devices
  themselves, their numbers, the disk statistics of /proc), every device's interrupt counts,
  every network device of the host
  (a sandbox has only its own loopback, or, with network, sees its traffic only at its peer),
  and the filesystems' own folders of /sys/fs (per-device counters: ext4's
  `lifetime_write_kbytes` of another run's loop device);
- no other process (a PID namespace each: `pidns`).

Nor the kernel's host-wide counters that a sandbox moves at will (`FIXED`, issue #50: inodes,
open files, file locks, aio contexts, stalls); /proc/stat and /proc/loadavg are shown as fixed
text (`NEUTRAL`, the local backend). What stays host-wide (/proc/meminfo, sysinfo(2), the
clock and the CPU's own timing, a file lock on a file both read) is shared by design of the
kernel; its capacity as a channel between two concurrent
sandboxes is measured in site/docs/security/channels.md, and an official track's hidden
grading runs alone on its host against it (`toolkit.host.grading_lock`).
"""

from __future__ import annotations

import contextlib
import os

MEASURED_BITS_PER_S = 160.0
"""The best rate measured between two concurrent local sandboxes through what a sandbox still
shares with the host (issue #50: a shared `flock` on a file both read, 5 ms a bit, 124 of 128
bits right, on a 2-core host at a load average of 7.8: scripts/measure-host-channel.py); the
other channels left (the task count of sysinfo(2): 50 bit/s; free memory, Shmem, CPU timing)
are slower. What an attacker gets at least, not a ceiling. The number `toolkit doctor`,
`campaign run --accept-host-channel` and site/docs/security/channels.md give."""
CLASSES = ("block", "net", "bdi")
"""Device classes whose every device is another run's (or the host's): disks and loop devices,
network interfaces, and the block devices' writeback (bdi) entries."""
FIXED = (
    "/sys/block",
    "/sys/dev/block",
    "/proc/diskstats",
    "/proc/partitions",
    "/sys/kernel/debug",
    # The container engine's own defaults (moby's `oci.DefaultSpec`), for both backends: the
    # interrupts of every device (a disk's queue counts another run's I/O), every task's
    # scheduling and timers, kernel memory, keys, and the energy counters (powercap).
    "/proc/asound", "/proc/acpi", "/proc/interrupts", "/proc/kcore", "/proc/keys",
    "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug",
    "/proc/scsi", "/sys/firmware", "/sys/devices/virtual/powercap",
    # The kernel's host-wide counters that a sandbox moves at will (issue #50): inodes and
    # dentries in use (a sender makes files in its private /tmp), open files, asynchronous I/O
    # contexts, pseudo-terminals, quota operations, every file lock of the host (a sender locks
    # a file of its own: one more line), and the VM's event counters. No program needs them.
    "/proc/sys/fs/inode-nr", "/proc/sys/fs/inode-state", "/proc/sys/fs/dentry-state",
    "/proc/sys/fs/file-nr", "/proc/sys/fs/aio-nr", "/proc/sys/fs/quota", "/proc/sys/kernel/pty/nr",
    "/proc/locks", "/proc/vmstat", "/proc/softirqs", "/proc/schedstat", "/proc/zoneinfo",
    "/proc/buddyinfo", "/proc/pagetypeinfo",
    "/proc/pressure",  # stall times of the whole host's CPU, memory and I/O
)  # fmt: skip
"""Views to mask whatever the host holds (a path absent on a host is skipped)."""


NEUTRAL = ("/proc/stat", "/proc/loadavg")
"""Views programs read (CPU times, the CPU count's fallback, load averages) whose counters any
sandbox moves: the busy time, the forks (`processes`) and running tasks of the whole host, the
task count of /proc/loadavg (issue #50: 4.4 bit/s). The local backend shows each as a file of
fixed text (`neutral_views`): the same lines, every counter 0."""


def neutral_views(proc: str = "/proc") -> list[tuple[str, str]]:
    """(path, text) for each of `NEUTRAL` this host has: /proc/stat with its own line names
    (one `cpuN` line per CPU, as glibc may count them) and boot time, every counter 0; a load
    of 0 with one task."""
    views: list[tuple[str, str]] = []
    try:
        with open(f"{proc}/stat") as f:
            lines = f.read().splitlines()
    except OSError:
        lines = []
    kept = []
    for line in lines:
        name, _, rest = line.partition(" ")
        if name == "btime":  # the host's boot time: fixed while it runs, says nothing
            kept.append(line)
        elif name.startswith("cpu"):
            zeros = " ".join("0" for _ in rest.split())
            kept.append(f"{name}  {zeros}" if name == "cpu" else f"{name} {zeros}")
        elif name in ("procs_running", "procs_blocked", "processes", "ctxt", "intr", "softirq"):
            kept.append(f"{name} {1 if name == 'procs_running' else 0}")
    if kept:
        views.append((f"{proc}/stat", "\n".join(kept) + "\n"))
    if os.path.exists(f"{proc}/loadavg"):
        views.append((f"{proc}/loadavg", "0.00 0.00 0.00 1/1 1\n"))
    return views


def masked_paths(sysfs: str = "/sys") -> list[str]:
    """Canonical paths to mask: `FIXED`, each class of `CLASSES` with its virtual devices'
    folder, and each device of those classes where it lies (a disk under its PCI device);
    only what exists here. `sysfs`: where the host's /sys is (tests give a fake one)."""
    found: list[str] = []
    for path in FIXED:
        path = path.replace("/sys", sysfs, 1) if path.startswith("/sys") else path
        if os.path.lexists(path):
            found.append(path)
    with contextlib.suppress(OSError):  # the filesystems' folders; not the cgroup one (it
        # is replaced by the sandbox's own cgroups)
        found += [f"{sysfs}/fs/{n}" for n in os.listdir(f"{sysfs}/fs") if n != "cgroup"]
    for name in CLASSES:
        folder = f"{sysfs}/class/{name}"
        for path in (folder, f"{sysfs}/devices/virtual/{name}"):
            if os.path.isdir(path):
                found.append(path)
        try:
            devices = sorted(os.listdir(folder))
        except OSError:
            continue
        for device in devices:
            real = os.path.realpath(os.path.join(folder, device))
            if os.path.isdir(real) and not any(_within(real, f) for f in found):
                found.append(real)
    return sorted(set(found))


def _within(path: str, other: str) -> bool:
    return path == other or path.startswith(other.rstrip("/") + "/")
