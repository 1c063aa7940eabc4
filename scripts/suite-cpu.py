#!/usr/bin/env python3
"""What each test costs in CPU, from the log `tests/conftest.py` writes when asked:

    ARI_TEST_CPU_LOG=/tmp/cpu.jsonl make test
    python3 scripts/suite-cpu.py /tmp/cpu.jsonl [--slowest 25]

On two cores with three workers, a test's wall time says more about its neighbours than about
itself; its CPU seconds (its worker's, and those of the processes it started and waited for)
add up to what the suite asks of the machine. Prints the CPU per folder, the tests that cost
the most, and when each worker finished (a worker that ends long before the others is a tail
worth reordering). Docker containers' CPU is not counted (the engine runs them).
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path


def folder_of(nodeid: str) -> str:
    parts = nodeid.split("::", 1)[0].split("/")
    return "/".join(parts[:-1]) + "/"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path)
    parser.add_argument("--slowest", type=int, default=25, help="list the N dearest tests")
    args = parser.parse_args()
    entries = [json.loads(line) for line in args.log.read_text().splitlines() if line.strip()]
    if not entries:
        raise SystemExit(f"{args.log}: no tests logged")
    folders: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for e in entries:
        f = folders[folder_of(e["test"])]
        f[0] += e["cpu_s"] + e["children_cpu_s"]
        f[1] += e["wall_s"]
        f[2] += 1
    total_cpu = sum(f[0] for f in folders.values())
    print("| folder | tests | CPU s | share | wall s (summed) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, (cpu, wall, count) in sorted(folders.items(), key=lambda kv: -kv[1][0]):
        print(f"| {name} | {count} | {cpu:.0f} | {cpu / total_cpu:.1%} | {wall:.0f} |")
    summed = sum(e["wall_s"] for e in entries)
    print(f"| all | {len(entries)} | {total_cpu:.0f} | 100% | {summed:.0f} |")
    print(f"\nthe {args.slowest} dearest tests (CPU s, wall s):")
    dearest = sorted(entries, key=lambda e: -(e["cpu_s"] + e["children_cpu_s"]))
    for e in dearest[: args.slowest]:
        print(f"  {e['cpu_s'] + e['children_cpu_s']:7.1f} {e['wall_s']:7.1f}  {e['test']}")
    start = min(e["end"] - e["wall_s"] for e in entries)
    ends: dict[str, float] = defaultdict(float)
    for e in entries:
        ends[e["worker"]] = max(ends[e["worker"]], e["end"] - start)
    print("\neach worker's last test ended (s after the first began):")
    for worker, end in sorted(ends.items()):
        print(f"  {worker}: {end:.0f}")


if __name__ == "__main__":
    main()
