#!/usr/bin/env python3
"""Measure what stays host-wide as a channel between two concurrent sandboxes (issues #38, #50).

Two local sandboxes run at once, as two runs of a 2-slot campaign do. One sends a random bit
string, one bit per time slot (Manchester-coded: active in the first half of the slot for a 1,
in the second for a 0); the other reads a host-wide view in each half and decodes by comparing
the two, so the host's own slow drift cancels out. Channels (the sender's action; what the
receiver reads):

- `meminfo`: holds 256 MiB; MemAvailable in /proc/meminfo.
- `stat`: spins a core; the host's busy jiffies in /proc/stat.
- `timing`: spins a core; its own loop iterations.
- `inotify-instances`: holds every inotify instance its uid may have; how many it may make.
- `inotify-watch`: reads a file both see (`--file`); the events of an inotify watch on it.
- `flock`: holds a shared flock on that file; whether an exclusive one is refused.
- `inode-nr`: makes 3,000 files in its private /tmp; the count in /proc/sys/fs/inode-nr.
- `file-nr`: opens 900 descriptors; the count in /proc/sys/fs/file-nr.
- `shmem`: writes 64 MiB to its private /dev/shm; Shmem in /proc/meminfo.
- `loadavg`: starts 64 threads; the task count in /proc/loadavg.
- `sysinfo`: the same; the task count of sysinfo(2) (what glibc's getloadavg reads too).
- `forks`: forks and reaps 100 children; the host's fork count (`processes` in /proc/stat).

Where a view cannot be read (masked, or the call refused), every reading is the same: the
decoder can only guess, and the channel is reported closed (capacity 0). Reported per
channel: slot, bit errors, the error rate p and the capacity of a binary symmetric channel,
(1 - H(p)) / slot bits per second: what this encoder carries at that slot length on this
host, at its current load (the load average is printed first: say it with the numbers).

    .venv/bin/python scripts/measure-host-channel.py --bits 64 --slot 0.02 0.1 --channel flock
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import tempfile
import time
from pathlib import Path

from toolkit.sandbox import Limits, create_sandbox

CHANNELS = (
    "meminfo", "stat", "timing", "inotify-instances", "inotify-watch", "flock", "inode-nr",
    "file-nr", "shmem", "loadavg", "sysinfo", "forks",
)  # fmt: skip

PEER = r"""
import ctypes, fcntl, os, sys, threading, time
mode, channel, t0, slot, bits, shared = sys.argv[1:7]
t0, slot = float(t0), float(slot)
libc = ctypes.CDLL(None, use_errno=True)

def wait_until(t):
    while time.time() < t:
        time.sleep(min(0.002, max(0.0, t - time.time())))

def field(path, name):
    with open(path) as f:
        for line in f:
            if line.startswith(name):
                return int(line.split()[1])
    return 0

def first(path, index=0):
    try:
        with open(path) as f:
            return int(f.read().split()[index])
    except (OSError, ValueError, IndexError):
        return 0

def busy():
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return sum(fields) - fields[3] - fields[4]

def inotify_count(limit=4096):
    fds = []
    while len(fds) < limit:
        fd = libc.inotify_init1(os.O_CLOEXEC)
        if fd < 0:
            break
        fds.append(fd)
    for fd in fds:
        os.close(fd)
    return len(fds)

watch = -1
if mode == "recv" and channel == "inotify-watch":
    watch = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    if watch >= 0:
        libc.inotify_add_watch(watch, shared.encode(), 0x1 | 0x20)  # IN_ACCESS | IN_OPEN

def events():
    count = 0
    while watch >= 0:
        try:
            count += len(os.read(watch, 65536))
        except OSError:
            break
    return count

def sysinfo_procs():
    buf = ctypes.create_string_buffer(256)
    if libc.sysinfo(buf) != 0:
        return 0
    return int.from_bytes(buf.raw[80:82], "little")  # struct sysinfo: procs after 10 longs

def forks():
    try:
        with open("/proc/stat") as f:
            for line in f:
                if line.startswith("processes "):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0

def tasks():
    try:
        with open("/proc/loadavg") as f:
            return int(f.read().split()[3].split("/")[1])
    except (OSError, ValueError, IndexError):
        return 0

def measure(start, end):
    at = start + (end - start) * 0.7
    if channel == "meminfo":
        wait_until(at)
        return -field("/proc/meminfo", "MemAvailable:")
    if channel == "stat":
        wait_until(start + (end - start) * 0.2)
        a = busy()
        wait_until(start + (end - start) * 0.8)
        return busy() - a
    if channel == "timing":
        wait_until(start + (end - start) * 0.2)
        n = 0
        stop = start + (end - start) * 0.8
        while time.time() < stop:
            n += 1
        return -n
    if channel == "inotify-instances":
        wait_until(at)
        return -inotify_count()
    if channel == "inotify-watch":
        events()
        wait_until(start + (end - start) * 0.9)
        return events()
    if channel == "flock":
        wait_until(at)
        try:
            fd = os.open(shared, os.O_RDONLY)
        except OSError:
            return 0
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return 0
        except OSError:
            return 1
        finally:
            os.close(fd)
    if channel == "inode-nr":
        wait_until(at)
        return first("/proc/sys/fs/inode-nr")
    if channel == "file-nr":
        wait_until(at)
        return first("/proc/sys/fs/file-nr")
    if channel == "shmem":
        wait_until(at)
        return field("/proc/meminfo", "Shmem:")
    if channel == "forks":
        wait_until(start + (end - start) * 0.2)
        a = forks()
        wait_until(start + (end - start) * 0.9)
        return forks() - a
    wait_until(at)
    return sysinfo_procs() if channel == "sysinfo" else tasks()

def send(start, stop):
    if channel == "meminfo":
        held = bytearray(256 * 2**20)
        for k in range(0, len(held), 4096):
            held[k] = 1
        wait_until(stop)
    elif channel == "inotify-instances":
        fds = []
        while len(fds) < 4096:
            fd = libc.inotify_init1(os.O_CLOEXEC)
            if fd < 0:
                break
            fds.append(fd)
        wait_until(stop)
        for fd in fds:
            os.close(fd)
    elif channel == "inotify-watch":
        while time.time() < stop:
            try:
                with open(shared, "rb") as f:
                    f.read(1)
            except OSError:
                break
    elif channel == "flock":
        try:
            fd = os.open(shared, os.O_RDONLY)
            fcntl.flock(fd, fcntl.LOCK_SH)
        except OSError:
            wait_until(stop)
            return
        wait_until(stop)
        os.close(fd)
    elif channel == "inode-nr":
        folder = f"/tmp/inodes-{os.getpid()}"
        os.makedirs(folder, exist_ok=True)
        names = [f"{folder}/{i}" for i in range(3000)]
        for name in names:
            os.close(os.open(name, os.O_CREAT | os.O_WRONLY))
        wait_until(stop)
        for name in names:
            os.unlink(name)
    elif channel == "file-nr":
        fds = [os.open("/dev/null", os.O_RDONLY) for _ in range(900)]
        wait_until(stop)
        for fd in fds:
            os.close(fd)
    elif channel == "shmem":
        path = f"/dev/shm/held-{os.getpid()}"
        with open(path, "wb") as f:
            f.write(b"x" * (64 * 2**20))
        wait_until(stop)
        os.unlink(path)
    elif channel == "forks":
        for _ in range(100):
            pid = os.fork()
            if pid == 0:
                os._exit(0)
            os.waitpid(pid, 0)
            if time.time() >= stop:
                break
        wait_until(stop)
    elif channel in ("loadavg", "sysinfo"):
        done = threading.Event()
        threads = [threading.Thread(target=done.wait) for _ in range(64)]
        for t in threads:
            t.start()
        wait_until(stop)
        done.set()
        for t in threads:
            t.join()
    else:
        while time.time() < stop:
            pass

# Manchester code: a bit is two half-slots, the sender active in the first for a 1, in the
# second for a 0; the receiver compares its two readings, so slow drift of the host cancels out.
out = []
half = slot / 2
for i, bit in enumerate(bits):
    for h in (0, 1):
        start = t0 + i * slot + h * half
        wait_until(start)
        active = (h == 0) == (bit == "1")
        if mode == "send" and active:
            send(start, start + half * 0.9)
        elif mode == "recv":
            out.append(measure(start, start + half))
if mode == "recv":
    print(" ".join(map(str, out)))
"""


def entropy(p: float) -> float:
    return 0.0 if p in (0.0, 1.0) else -p * math.log2(p) - (1 - p) * math.log2(1 - p)


def decode(values: list[float], rng: random.Random) -> str:
    """A bit per pair of readings: 1 where the first is larger; a tie is a guess."""
    bits = []
    for a, b in zip(values[::2], values[1::2], strict=True):
        bits.append(("1" if a > b else "0") if a != b else rng.choice("01"))
    return "".join(bits)


def measure(channel: str, bits: str, slot: float, shared: str) -> tuple[int, float, bool]:
    limits = Limits(memory_bytes=1024 * 2**20, max_processes=256, cpus=1.0)
    with tempfile.TemporaryDirectory() as folder:
        roots = [Path(folder, name) for name in ("sender", "receiver")]
        for root in roots:
            root.mkdir()
        with (
            create_sandbox("local", root=roots[0], limits=limits) as sender,
            create_sandbox("local", root=roots[1], limits=limits) as recv,
        ):
            t0 = f"{time.time() + 2.0:.3f}"
            args = [channel, t0, str(slot), bits, shared]
            send = sender.start([sys.executable, "-c", PEER, "send", *args])
            result = recv.exec([sys.executable, "-c", PEER, "recv", *args], timeout=3600)
            send.wait(60)
    values = [float(v) for v in result.stdout.split()]
    decoded = decode(values, random.Random(50))
    errors = sum(a != b for a, b in zip(decoded, bits, strict=True))
    return errors, errors / len(bits), len(set(values)) == 1


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--bits", type=int, default=64)
    parser.add_argument("--slot", type=float, nargs="+", default=[0.5])
    parser.add_argument("--channel", nargs="+", choices=CHANNELS, default=list(CHANNELS))
    parser.add_argument(
        "--file",
        default="/etc/passwd",
        help="a file both sandboxes see, for inotify-watch and flock: in a system folder, or "
        "the interpreter (every local sandbox sees those)",
    )
    args = parser.parse_args()
    rng = random.Random(38)
    bits = "".join(rng.choice("01") for _ in range(args.bits))
    print(f"load average: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    print("channel            slot_s  bits  errors  p      capacity_bit_s")
    for channel in args.channel:
        for slot in args.slot:
            errors, p, constant = measure(channel, bits, slot, args.file)
            capacity = 0.0 if constant else (1 - entropy(min(p, 1 - p))) / slot
            note = "  (every reading the same: closed; the errors are the decoder's guesses)"
            print(
                f"{channel:18} {slot:6.3f}  {args.bits:4}  {errors:6}  {p:.3f}  {capacity:.2f}"
                + (note if constant else "")
            )


if __name__ == "__main__":
    main()
