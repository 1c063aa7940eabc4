#!/usr/bin/env python3
"""Write tests/slow.json, the measured list behind the `slow` marker, from CPU logs:

    ARI_TEST_CPU_LOG=/tmp/cpu.jsonl CI=true make test TEST_WORKERS=0
    python3 scripts/suite-slow.py /tmp/cpu.jsonl [more logs] [--threshold-s 1.0]

The file names every test file the logs measured, and in them each test whose wall time or CPU
time (its worker's and its children's) reached the threshold; `tests/conftest.py` marks those
`slow`, and also every test of a file the logs did not measure (a new file is slow until it is
timed). `make test-quick` leaves them out (`-m "not slow"`). Log whole files, on one worker
(`TEST_WORKERS=0`), so that a test's seconds are its own and not its neighbours': a log cut
short leaves its last file out (`--drop-last-file`). A session-wide set-up (the Docker engine,
the trained starter) is charged to the first test that asks for it. With `--merge`, the tests
and files of the current tests/slow.json stay, and the logs' files replace theirs.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The xdist group a parallel run appends to a test's id (tests/conftest.py, `_name_groups`).
GROUP_SUFFIX = re.compile(r"@(docker|ray|cgroup-kernel|host-scratch|module:[^@\[\]]+)$")


def seconds_per_test(log: Path, drop_last_file: bool) -> dict[str, float]:
    """Each test's larger of wall and CPU seconds (the last entry wins where a log repeats it)."""
    seconds: dict[str, float] = {}
    for line in log.read_text(encoding="utf-8").splitlines():
        if line.strip():
            e = json.loads(line)
            if not e["test"].startswith("tests/"):
                continue  # a small suite a test ran (tests/test_xdist.py), logged beside it
            cpu = e["cpu_s"] + e["children_cpu_s"]
            seconds[GROUP_SUFFIX.sub("", e["test"])] = max(e["wall_s"], cpu)
    if drop_last_file and seconds:
        last = file_of(list(seconds)[-1])
        seconds = {t: s for t, s in seconds.items() if file_of(t) != last}
    return seconds


def file_of(test: str) -> str:
    return test.split("::", 1)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", type=Path, nargs="+")
    parser.add_argument("--threshold-s", type=float, default=1.0)
    parser.add_argument("--out", type=Path, default=REPO / "tests" / "slow.json")
    parser.add_argument("--measured", default="", help="what run the logs come from (recorded)")
    parser.add_argument("--merge", action="store_true", help="keep what --out holds already")
    parser.add_argument(
        "--drop-last-file", action="store_true", help="each log's last file was cut short"
    )
    args = parser.parse_args()
    seconds: dict[str, float] = {}
    for log in args.logs:
        seconds.update(seconds_per_test(log, args.drop_last_file))
    files = {file_of(t) for t in seconds}
    slow = {t: round(s, 1) for t, s in seconds.items() if s >= args.threshold_s}
    measured = [args.measured] if args.measured else []
    if args.merge and args.out.is_file():
        old = json.loads(args.out.read_text(encoding="utf-8"))
        slow |= {t: s for t, s in old["tests"].items() if file_of(t) not in files}
        files |= set(old["files"])
        measured = old["measured"] + measured
    document = {
        "about": "tests/conftest.py marks slow the tests below, and every test of a file not "
        "listed; scripts/suite-slow.py writes this file from CPU logs (testing.md)",
        "measured": measured,
        "threshold_s": args.threshold_s,
        "files": sorted(files),
        "tests": dict(sorted(slow.items())),
    }
    args.out.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    quick = [s for t, s in seconds.items() if t not in slow]
    print(f"{len(files)} files measured; {len(slow)} slow tests written to {args.out}")
    print(f"the quick lane of these logs: {len(quick)} tests, {sum(quick):.0f} s on one worker")


if __name__ == "__main__":
    main()
