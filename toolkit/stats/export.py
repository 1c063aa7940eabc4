"""The leaderboard as data: CSV and JSON, shared by `toolkit leaderboard` and the site downloads.

One list of columns, used by both formats, so the CLI and the downloadable files never disagree.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from toolkit.stats.board import Row
from toolkit.tracks import Track

# (column, what it holds): the CSV header and the JSON keys, in this order.
COLUMNS: list[tuple[str, str]] = [
    ("track", "track id"),
    ("rank", "overlap-aware rank; '=k' is a tie; empty when unranked"),
    ("model", "model under test"),
    ("effort", "reasoning effort (empty when none)"),
    ("mean", "mean hidden-exam percent over valid + failed runs"),
    ("se", "standard error of the mean (empty when fewer than 2 runs)"),
    ("n", "scored runs (valid + failed)"),
    ("seeds_required", "scored runs needed for an official row"),
    ("provisional", "fewer scored runs than required"),
    ("legacy", "graded under a superseded protocol revision; not ranked"),
    ("protocol_revision", "protocol revision of the row's runs"),
    ("superseded_by", "protocol fix that superseded a legacy row"),
    ("failed", "runs with no usable promoted artifact (scored 0)"),
    ("awaiting_rerun", "invalid runs (infrastructure failures) awaiting a rerun"),
    ("bits_per_byte", "mean bits-per-byte on the hidden answer spans"),
    ("best_public", "best public-validation percent over the runs"),
    ("gap", "best public minus mean hidden percent"),
]


def row_record(row: Row) -> dict[str, Any]:
    """A row as flat, JSON-ready values, in `COLUMNS` order."""
    return {
        "track": row.track,
        "rank": row.rank_label,
        "model": row.model,
        "effort": row.effort,
        "mean": row.mean,
        "se": row.se,
        "n": row.n,
        "seeds_required": row.seeds_required,
        "provisional": row.provisional,
        "legacy": row.legacy,
        "protocol_revision": row.protocol_revision,
        "superseded_by": row.superseded_by,
        "failed": row.failed,
        "awaiting_rerun": len(row.awaiting_rerun),
        "bits_per_byte": row.bits_per_byte,
        "best_public": row.best_public,
        "gap": row.gap,
    }


def to_csv(rows: list[Row]) -> str:
    """CSV with a header; empty cells for undefined values (e.g. SE with one run)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=[c for c, _ in COLUMNS], lineterminator="\n")
    writer.writeheader()
    for row in rows:
        record = row_record(row)
        writer.writerow({k: ("" if v is None else v) for k, v in record.items()})
    return out.getvalue()


def to_json(rows: list[Row], tracks: list[Track]) -> str:
    """JSON: the tracks' frozen parameters, a column glossary and the rows (null = undefined)."""
    doc = {
        "tracks": [t.model_dump(mode="json") for t in tracks],
        "columns": dict(COLUMNS),
        "rows": [row_record(r) for r in rows],
    }
    return json.dumps(doc, indent=2) + "\n"
