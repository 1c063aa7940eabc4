#!/usr/bin/env python3
"""The test suite's time per folder, from pytest's JUnit XML (`--junitxml FILE`).

    make test PYTEST_ARGS=--junitxml=/tmp/after.xml
    python3 scripts/suite-durations.py /tmp/after.xml [--before /tmp/before.xml] [--slowest 5]

Prints a Markdown table: per folder of tests/ (a top-level test file counts as `tests/`), the
tests that ran (passed + failed), skipped, and the seconds its tests took (setup, call and
teardown, summed: on several workers this adds up the workers' time, it is not the wall time).
With --before, the same columns of an earlier run beside them.
"""

from __future__ import annotations

import argparse
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Folder:
    ran: int = 0
    skipped: int = 0
    failed: int = 0
    seconds: float = 0.0
    slowest: list[tuple[float, str]] = field(default_factory=list)


def folder_of(classname: str) -> str:
    parts = classname.split(".")  # tests.run.test_x(.Class)
    return (
        "tests/"
        if len(parts) <= 2 or not parts[1] or parts[1].startswith("test_")
        else f"tests/{parts[1]}/"
    )


def read(path: Path) -> dict[str, Folder]:
    folders: dict[str, Folder] = defaultdict(Folder)
    for case in ET.parse(path).getroot().iter("testcase"):
        name = folder_of(case.get("classname", ""))
        f = folders[name]
        seconds = float(case.get("time") or 0.0)
        f.seconds += seconds
        if case.find("skipped") is not None:
            f.skipped += 1
            continue
        f.ran += 1
        if case.find("failure") is not None or case.find("error") is not None:
            f.failed += 1
        f.slowest.append((seconds, f"{case.get('classname')}::{case.get('name')}"))
    return folders


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("xml", type=Path)
    parser.add_argument("--before", type=Path)
    parser.add_argument("--slowest", type=int, default=0, help="list each folder's N slowest")
    args = parser.parse_args()
    after = read(args.xml)
    before = read(args.before) if args.before else {}
    head = "| folder | tests | skipped | failed | seconds |"
    rule = "| --- | ---: | ---: | ---: | ---: |"
    if before:
        head += " seconds before | tests before |"
        rule += " ---: | ---: |"
    print(head)
    print(rule)
    names = sorted(set(after) | set(before), key=lambda n: -after.get(n, Folder()).seconds)
    total, total_before = Folder(), Folder()
    for name in names:
        a, b = after.get(name, Folder()), before.get(name, Folder())
        for t, f in ((total, a), (total_before, b)):
            t.ran, t.skipped, t.failed, t.seconds = (
                t.ran + f.ran,
                t.skipped + f.skipped,
                t.failed + f.failed,
                t.seconds + f.seconds,
            )
        row = f"| {name} | {a.ran} | {a.skipped} | {a.failed} | {a.seconds:.0f} |"
        if before:
            row += f" {b.seconds:.0f} | {b.ran} |"
        print(row)
    row = f"| all | {total.ran} | {total.skipped} | {total.failed} | {total.seconds:.0f} |"
    if before:
        row += f" {total_before.seconds:.0f} | {total_before.ran} |"
    print(row)
    if args.slowest:
        for name in names:
            print(f"\n{name}")
            for seconds, test in sorted(after[name].slowest, reverse=True)[: args.slowest]:
                print(f"  {seconds:7.1f}s  {test}")


if __name__ == "__main__":
    main()
