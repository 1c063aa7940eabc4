"""The host's journal of runs: one line per run started here, so `toolkit runs list` finds
every run of this host (running, finished, interrupted) whatever results folder it wrote to.

`$ARI_HOME/runs.jsonl`, appended when a run's harness writes its crash marker (before any
process starts). A line: run id, identity, and where its harness folder, artifacts and result
go. The harness folder says whether it still runs (`recovery.MARKER` with a live pid).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel

from toolkit.paths import state_dir

JOURNAL = "runs.jsonl"
STOP_FILE = "STOP"
"""In a run's harness folder: why the operator stopped it (`toolkit runs kill`)."""


class Entry(BaseModel):
    run_id: str
    track: str
    model: str
    effort: str | None
    seed: int
    agent: str
    started_at: datetime
    budget_s: float
    harness: str
    artifacts: str
    results_dir: str

    @property
    def result_path(self) -> Path:
        return Path(self.results_dir) / self.track / f"{self.run_id}.json"


def journal_path() -> Path:
    return state_dir() / JOURNAL


def append(entry: Entry) -> None:
    path = journal_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(entry.model_dump_json() + "\n")


def entries() -> list[Entry]:
    """Every run of the journal, newest first (a damaged line is skipped)."""
    found: dict[str, Entry] = {}
    with contextlib.suppress(FileNotFoundError):
        for line in journal_path().read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValueError):
                entry = Entry.model_validate(json.loads(line))
                found[entry.run_id] = entry
    return sorted(found.values(), key=lambda e: e.started_at, reverse=True)


def find(prefix: str) -> Entry:
    """The run whose id is `prefix` or starts with it; LookupError says why not."""
    runs = entries()
    exact = [e for e in runs if e.run_id == prefix]
    matches = exact or [e for e in runs if e.run_id.startswith(prefix)]
    if not matches:
        raise LookupError(f"no run '{prefix}' on this host (`toolkit runs list --all`)")
    if len(matches) > 1:
        ids = ", ".join(e.run_id for e in matches[:5])
        raise LookupError(f"'{prefix}' names {len(matches)} runs ({ids}...): give more of the id")
    return matches[0]
