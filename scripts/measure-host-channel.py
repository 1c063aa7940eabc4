#!/usr/bin/env python3
"""Measure what stays host-wide as a channel between two concurrent sandboxes (issue #38).

Two local sandboxes run at once, as two runs of a 2-slot campaign do. One sends a random bit
string, one bit per time slot (Manchester-coded: busy in the first half of the slot for a 1, in
the second for a 0); the other reads a host-wide view in each half and decodes by comparing
the two, so the host's own slow drift cancels out. Channels: `meminfo` (the sender holds
256 MiB or not; the receiver reads MemAvailable), `stat` (the sender spins a core or not;
the receiver reads the host's busy jiffies in /proc/stat), `timing` (the same spinning; the
receiver counts its own loop iterations). Reported per channel: slot, bit errors, the error
rate p and the capacity of a binary symmetric channel, (1 - H(p)) / slot bits per second: what
this encoder carries at that slot length on this host, at its current load.

    .venv/bin/python scripts/measure-host-channel.py --bits 64 --slot 0.5 2
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

PEER = r"""
import sys, time
mode, channel, t0, slot, bits = sys.argv[1:6]
t0, slot = float(t0), float(slot)

def wait_until(t):
    while time.time() < t:
        time.sleep(min(0.01, max(0.0, t - time.time())))

def available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1])
    return 0

def busy():
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return sum(fields) - fields[3] - fields[4]

def measure(start, end):
    if channel == "meminfo":
        wait_until(start + (end - start) * 0.7)
        return -available()  # less available while the sender holds memory
    if channel == "stat":
        wait_until(start + (end - start) * 0.2)
        a = busy()
        wait_until(start + (end - start) * 0.8)
        return busy() - a
    wait_until(start + (end - start) * 0.2)
    n = 0
    stop = start + (end - start) * 0.8
    while time.time() < stop:
        n += 1
    return -n  # fewer iterations while the sender spins

# Manchester code: a bit is two half-slots, the sender busy in the first for a 1, in the second
# for a 0; the receiver compares its two readings, so slow drift of the host cancels out.
out = []
half = slot / 2
for i, bit in enumerate(bits):
    for h in (0, 1):
        start = t0 + i * slot + h * half
        wait_until(start)
        active = (h == 0) == (bit == "1")
        if mode == "send" and active:
            if channel == "meminfo":
                held = bytearray(256 * 2**20)
                for k in range(0, len(held), 4096):
                    held[k] = 1
                wait_until(start + half * 0.9)
                del held
            else:
                while time.time() < start + half * 0.9:
                    pass
        elif mode == "recv":
            out.append(measure(start, start + half))
if mode == "recv":
    print(" ".join(map(str, out)))
"""


def entropy(p: float) -> float:
    return 0.0 if p in (0.0, 1.0) else -p * math.log2(p) - (1 - p) * math.log2(1 - p)


def measure(channel: str, bits: str, slot: float) -> tuple[int, float]:
    limits = Limits(memory_bytes=1024 * 2**20, max_processes=64, cpus=1.0)
    with tempfile.TemporaryDirectory() as folder:
        roots = [Path(folder, name) for name in ("sender", "receiver")]
        for root in roots:
            root.mkdir()
        with (
            create_sandbox("local", root=roots[0], limits=limits) as sender,
            create_sandbox("local", root=roots[1], limits=limits) as receiver,
        ):
            t0 = f"{time.time() + 2.0:.3f}"
            args = [channel, t0, str(slot), bits]
            send = sender.start([sys.executable, "-c", PEER, "send", *args])
            result = receiver.exec([sys.executable, "-c", PEER, "recv", *args], timeout=3600)
            send.wait(60)
    values = [float(v) for v in result.stdout.split()]
    decoded = "".join("1" if a > b else "0" for a, b in zip(values[::2], values[1::2], strict=True))
    errors = sum(a != b for a, b in zip(decoded, bits, strict=True))
    return errors, errors / len(bits)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bits", type=int, default=64)
    parser.add_argument("--slot", type=float, nargs="+", default=[0.5])
    parser.add_argument("--channel", nargs="+", default=["meminfo", "stat", "timing"])
    args = parser.parse_args()
    rng = random.Random(38)
    bits = "".join(rng.choice("01") for _ in range(args.bits))
    print("channel  slot_s  bits  errors  p      capacity_bit_s")
    for channel in args.channel:
        for slot in args.slot:
            errors, p = measure(channel, bits, slot)
            capacity = (1 - entropy(min(p, 1 - p))) / slot
            print(f"{channel:8} {slot:6.2f}  {args.bits:4}  {errors:6}  {p:.3f}  {capacity:.2f}")


if __name__ == "__main__":
    main()
