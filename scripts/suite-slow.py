#!/usr/bin/env python3
"""Write tests/slow.json, the measured list behind the `slow` marker, from CPU logs:

    ARI_TEST_CPU_LOG=/tmp/cpu.jsonl CI=true make test TEST_WORKERS=0
    python3 scripts/suite-slow.py /tmp/cpu.jsonl [more logs] [--threshold-s 1.0]

A test is slow when its wall time or its CPU time (its worker's and its children's) reached the
threshold in the logged run; `tests/conftest.py` marks it so, and `make test-quick` leaves it
out (`-m "not slow"`). Log the run on one worker (`TEST_WORKERS=0`), so that a test's seconds
are its own and not its neighbours'. A session-wide set-up (the Docker engine, the trained
starter) is charged to the first test that asks for it: that test is slow, the others that
share it may not be. Prints what the quick lane keeps and what it leaves out.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The xdist group a parallel run appends to a test's id (tests/conftest.py, `_name_groups`).
GROUP_SUFFIX = re.compile(r"@(docker|ray|cgroup-kernel|host-scratch|module:[^@\[\]]+)$")


def seconds_per_test(logs: list[Path]) -> dict[str, float]:
    """Each test's larger of wall and CPU seconds (the last entry wins where a log repeats it)."""
    seconds: dict[str, float] = {}
    for log in logs:
        for line in log.read_text(encoding="utf-8").splitlines():
            if line.strip():
                e = json.loads(line)
                cpu = e["cpu_s"] + e["children_cpu_s"]
                seconds[GROUP_SUFFIX.sub("", e["test"])] = max(e["wall_s"], cpu)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", type=Path, nargs="+")
    parser.add_argument("--threshold-s", type=float, default=1.0)
    parser.add_argument("--out", type=Path, default=REPO / "tests" / "slow.json")
    parser.add_argument("--measured", default="", help="what run the logs come from (recorded)")
    args = parser.parse_args()
    seconds = seconds_per_test(args.logs)
    slow = {t: round(s, 1) for t, s in sorted(seconds.items()) if s >= args.threshold_s}
    document = {
        "about": "tests whose wall or CPU seconds reached threshold_s; scripts/suite-slow.py",
        "measured": args.measured,
        "threshold_s": args.threshold_s,
        "tests": slow,
    }
    args.out.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    quick = [s for t, s in seconds.items() if t not in slow]
    print(f"{len(slow)} slow tests ({sum(slow.values()):.0f} s) written to {args.out}")
    print(f"the quick lane: {len(quick)} tests, {sum(quick):.0f} s on one worker")


if __name__ == "__main__":
    main()
