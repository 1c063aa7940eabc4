#!/usr/bin/env python3
"""Where a command's CPU goes, by kind of process: a sampler of /proc for the test suite.

    python3 scripts/cpu-by-process.py --out /tmp/cpu.json -- make test
    python3 scripts/cpu-by-process.py --report /tmp/cpu.json

Runs the command and, every `--interval` seconds, reads each process's CPU time (user +
system, /proc/PID/stat) and its command line; each process's growth since the last sample is
charged to its kind (`KINDS`: a pytest worker, a `toolkit` command, a run process, a grading
worker, the starter's training, the Docker engine, Ray, Chromium, opencode...). A process that
starts and ends between two samples is not seen: its time is the line "not seen (short
processes)", the difference between the box's busy time (/proc/stat) and the sum of the kinds,
which also holds whatever else ran on the box. Prints a table (CPU seconds and share per kind)
and writes it as JSON with --out, with the box's busy cores in each `--window` of seconds
(`timeline`: where a suite leaves cores idle, e.g. while its workers wait on containers). The
sampler itself costs about 1% of a core.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")

KINDS: list[tuple[str, re.Pattern[str]]] = [
    (kind, re.compile(pattern))
    for kind, pattern in [
        ("grading worker (worker.py)", r"(^|[ /])worker\.py\b"),
        ("starter training (train.py)", r"(^|[ /])train\.py\b"),
        ("run process (campaign child)", r"toolkit\.campaign\.child"),
        ("sandbox launcher", r"toolkit\.sandbox\.\w+\.launcher|(^|[ /])(launcher|seccomp)\.py\b"),
        ("runner (service, client)", r"toolkit\.runner\b|/runner(\.py)?\b|\bsubmit\b"),
        ("toolkit command", r"(^|/)toolkit( |$)|-m toolkit\b"),
        ("opencode", r"opencode"),
        ("docker engine", r"\b(dockerd|containerd|containerd-shim\S*|runc|docker-init)\b"),
        ("docker build (debootstrap, dpkg, pip)", r"debootstrap|dpkg|apt|pip install"),
        ("ray", r"\bray\b|raylet|gcs_server|ray::|default_worker\.py|dashboard"),
        ("chromium", r"chrom"),
        ("mkdocs (site build)", r"mkdocs"),
        ("pytest (worker or controller)", r"(^|\s)(\S*/)?pytest(\s|$)|-m pytest\b|stdin\.readline"),
        ("compilers (torch.compile)", r"\b(cc1plus|cc1|c\+\+|g\+\+|gcc|ld)\b"),
        ("python, other", r"python"),
        ("shell and tools", r"\b(bash|sh|tar|gzip|git|cp|rm|find|sleep|timeout|make)\b"),
    ]
]


def kind_of(command: str) -> str:
    for kind, pattern in KINDS:
        if pattern.search(command):
            return kind
    return "other"


def _short(command: str) -> str:
    """A command line without its paths' folders and long arguments, to add up alike ones."""
    words = [w.rsplit("/", 1)[-1] if w.startswith("/") else w for w in command.split()[:4]]
    return " ".join(w[:40] for w in words)


def busy_seconds() -> float:
    """The box's busy CPU seconds so far (all cores; idle and iowait left out)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    values = [int(v) for v in fields]
    return (sum(values) - values[3] - values[4]) / TICKS


def snapshot() -> dict[int, tuple[float, str]]:
    """pid -> (CPU seconds used, command line) of every process readable now."""
    out: dict[int, tuple[float, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            raw = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        used = (int(fields[11]) + int(fields[12])) / TICKS
        name = stat[stat.find("(") + 1 : stat.rfind(")")]
        command = raw.replace(b"\0", b" ").decode(errors="replace").strip() or f"[{name}]"
        out[int(entry)] = (used, command)
    return out


class Sampler(threading.Thread):
    def __init__(self, interval: float, window: float) -> None:
        super().__init__(daemon=True)
        self.interval = interval
        self.window = window
        self.timeline: list[float] = []  # busy cores (CPU s / s) of each window
        self.by_kind: dict[str, float] = defaultdict(float)
        self.by_command: dict[str, float] = defaultdict(float)
        self.stop = threading.Event()
        self.me = os.getpid()

    def run(self) -> None:
        last = snapshot()
        window_start, window_busy = time.monotonic(), busy_seconds()
        while not self.stop.wait(self.interval):
            if time.monotonic() - window_start >= self.window:
                clock, busy = time.monotonic(), busy_seconds()
                self.timeline.append(round((busy - window_busy) / (clock - window_start), 2))
                window_start, window_busy = clock, busy
            now = snapshot()
            for pid, (used, command) in now.items():
                if pid == self.me:
                    continue
                before = last.get(pid)
                grown = used - before[0] if before is not None else used
                if grown > 0:
                    self.by_kind[kind_of(command)] += grown
                    self.by_command[_short(command)] += grown
            last = now


def table(result: dict[str, object]) -> str:
    kinds: dict[str, float] = result["kinds"]  # type: ignore[assignment]
    busy = float(result["busy_s"])  # type: ignore[arg-type]
    lines = [
        f"{result['command']}: {result['wall_s']:.0f} s of wall time, {busy:.0f} CPU seconds busy",
        "",
        "| kind of process | CPU s | share |",
        "| --- | ---: | ---: |",
    ]
    for kind, seconds in sorted(kinds.items(), key=lambda kv: -kv[1]):
        lines.append(f"| {kind} | {seconds:.0f} | {100 * seconds / busy:.1f}% |")
    commands: dict[str, float] = result.get("commands", {})  # type: ignore[assignment]
    if commands:
        lines += ["", "| the costliest command lines (first words) | CPU s |", "| --- | ---: |"]
        for command, seconds in sorted(commands.items(), key=lambda kv: -kv[1])[:25]:
            lines.append(f"| `{command}` | {seconds:.0f} |")
    timeline: list[float] = result.get("timeline", [])  # type: ignore[assignment]
    if timeline:
        window = result.get("window_s", 0)
        lines += ["", f"busy cores in each {window} s (from the start):"]
        lines += [
            " ".join(f"{b:4.2f}" for b in timeline[i : i + 10]) for i in range(0, len(timeline), 10)
        ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write the table as JSON here")
    parser.add_argument("--interval", type=float, default=0.25)
    parser.add_argument("--window", type=float, default=10.0, help="seconds per timeline entry")
    parser.add_argument("--report", type=Path, help="print the table of an earlier --out")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    if args.report:
        print(table(json.loads(args.report.read_text())))
        return 0
    command = [c for c in args.command if c != "--"] if args.command else []
    if not command:
        parser.error("give a command after --, or --report FILE")
    sampler = Sampler(args.interval, args.window)
    busy0, wall0 = busy_seconds(), time.monotonic()
    sampler.start()
    code = subprocess.call(command)
    sampler.stop.set()
    sampler.join()
    busy = busy_seconds() - busy0
    kinds = dict(sampler.by_kind)
    kinds["not seen (short processes, anything else)"] = max(0.0, busy - sum(kinds.values()))
    result = {
        "command": " ".join(command),
        "exit_code": code,
        "wall_s": time.monotonic() - wall0,
        "busy_s": busy,
        "kinds": kinds,
        "commands": dict(sorted(sampler.by_command.items(), key=lambda kv: -kv[1])[:200]),
        "window_s": args.window,
        "timeline": sampler.timeline,
    }
    print(table(result), file=sys.stderr)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
