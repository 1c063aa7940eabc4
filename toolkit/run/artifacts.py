"""A run's artifacts: the files beside its result, and how a result lists them.

The run folder `results/<track>/<run_id>/` holds the audit log, the submission history, the
agent's transcript, the harness's own log, whatever the scaffold adds (an event stream, say),
and `candidates/` (the packed archives, binary, found by candidate id). A result lists every
file of the folder's top level under a key (the usual ones under fixed keys), so nothing the
run left behind goes unmentioned, whether the run ended normally or was recovered after its
harness died.
"""

from __future__ import annotations

import re
import stat
from pathlib import Path

from toolkit.chain import ChainError, chain_head
from toolkit.results import LogHead
from toolkit.run.history import HISTORY_FILE

AUDIT_FILE = "audit.jsonl"
TRANSCRIPT_FILE = "transcript.txt"
AGENT_LOG = "agent.log"
CANDIDATES_DIR = "candidates"
KNOWN = {AUDIT_FILE: "audit", HISTORY_FILE: "history", TRANSCRIPT_FILE: "transcript"}
KNOWN[AGENT_LOG] = "agent_log"


def _key(name: str) -> str:
    """`events.jsonl` -> `events`: the file's stem in lower case, other characters as `_`."""
    stem = name.split(".", 1)[0] if not name.startswith(".") else name
    return KNOWN.get(name) or re.sub(r"[^a-z0-9]+", "_", stem.lower()).strip("_") or "file"


def list_artifacts(folder: Path, run_id: str) -> dict[str, str]:
    """Every regular file at the top of `folder`, as {key: "<run_id>/<name>"} (links and
    sub-folders left out; `candidates/` is found by id, not listed)."""
    out: dict[str, str] = {}
    try:
        names = sorted(p.name for p in folder.iterdir())
    except OSError:
        return out
    for name in names:
        try:
            if not stat.S_ISREG((folder / name).lstat().st_mode):
                continue
        except OSError:
            continue
        key = _key(name)
        while key in out:  # two names that clean to the same key: keep both
            key += "_"
        out[key] = f"{run_id}/{name}"
    return out


CHAINED_ARTIFACTS = ("audit", "history")
"""Keys of `RunResult.artifacts` that are chained logs."""


def log_heads(folder: Path, artifacts: dict[str, str]) -> dict[str, LogHead]:
    """The head of each chained log among `artifacts` (paths relative to `folder`).

    A log whose chain is already broken gets no head: the run that has one is invalid for it.
    """
    heads: dict[str, LogHead] = {}
    for key in CHAINED_ARTIFACTS:
        if key not in artifacts:
            continue
        try:
            entries, head = chain_head(folder / artifacts[key])
        except ChainError:
            continue
        heads[key] = LogHead(entries=entries, sha256=head)
    return heads
