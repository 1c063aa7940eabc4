"""The seed of the next `make demo` run, from the results the demo's track folder holds.

A seed whose only results are `invalid` (a run stopped with Ctrl-C, an infrastructure failure)
is rerun first, the smallest such seed; otherwise the smallest seed with no result at all.
Without this, an interrupted seed stayed "awaiting rerun" on the demo's board for good while
each demo took the next seed. Unreadable files are skipped (`runs validate` reports them).

Usage: python scripts/demo-seed.py RESULTS/TRACK  (prints one number)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SCORED = ("valid", "failed")  # a seed with one of these counts on the board: done


def next_seed(track_folder: Path) -> int:
    """The seed to run next in `track_folder` (see the module docstring)."""
    statuses: dict[int, set[str]] = {}
    for path in track_folder.glob("*.json"):
        try:
            record = json.loads(path.read_text())
            seed, status = record["seed"], record["status"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if isinstance(seed, int) and isinstance(status, str):
            statuses.setdefault(seed, set()).add(status)
    rerun = sorted(s for s, found in statuses.items() if not found & set(SCORED))
    if rerun:
        return rerun[0]
    return next(s for s in range(len(statuses) + 1) if s not in statuses)


if __name__ == "__main__":
    print(next_seed(Path(sys.argv[1])))
