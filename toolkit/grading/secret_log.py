"""The operator log: what a bundle said during a hidden grading, kept for the operator only.

A hidden grading publishes failure categories (`session.Category`), never the bundle's words:
its error text, stderr tail or malformed reply may hold the exam it was just shown. Those words
still help the operator tell a broken bundle from a broken harness, so they are appended here,
one JSON object per line, in `$ARI_HOME/operator/grading.log`: a folder of mode 0700 and a file
of mode 0600 in the state folder, which every sandbox hides and which is no part of a results
folder (the site and `toolkit results` never read it). Nothing here is ever printed.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

from toolkit.paths import state_dir

LOG_NAME = "grading.log"
DETAIL_CHARS = 20_000
"""The most of one entry's detail that is kept (a traceback fits whole)."""


def operator_dir() -> Path:
    """`$ARI_HOME/operator`, created private (0700)."""
    folder = state_dir() / "operator"
    folder.mkdir(mode=0o700, exist_ok=True)
    os.chmod(folder, 0o700)
    return folder


def log_path() -> Path:
    """The operator log's file."""
    return operator_dir() / LOG_NAME


def record(what: str, detail: str, **context: str | None) -> None:
    """Append one entry: `what` (a category), `detail` (the secret part) and `context` (e.g. the
    exam's and the bundle's hashes). Never raises: a full disk must not change a grade."""
    entry = {"at": datetime.now(UTC).isoformat(), "what": what, **context}
    entry["detail"] = detail[:DETAIL_CHARS]
    line = (json.dumps(entry, ensure_ascii=True) + "\n").encode()
    try:
        fd = os.open(log_path(), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, line)
        finally:
            os.close(fd)
    except OSError:
        pass
