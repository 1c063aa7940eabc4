"""The leaderboard as data: CSV and JSON, shared by `toolkit leaderboard` and the site downloads.

One list of columns, used by both formats, so the CLI and the downloadable files never disagree.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from toolkit.stats.board import Row
from toolkit.stats.cost import front_keys
from toolkit.tracks.model import Track

# (column, what it holds): the CSV header and the JSON keys, in this order.
COLUMNS: list[tuple[str, str]] = [
    ("track", "track id"),
    ("rank", "places the row could hold: '3', or '2–5' when intervals overlap; empty: unranked"),
    ("rank_best", "best place: 1 + rows whose interval lies entirely above this row's"),
    ("rank_worst", "worst place: rows whose interval is not entirely below this row's"),
    ("model", "model under test"),
    ("effort", "reasoning effort (empty when none)"),
    ("mean", "mean exam percent over the counted runs (one per seed; failed runs score 0)"),
    ("se", "standard error of the mean (empty when fewer than 2 counted runs)"),
    ("n", "counted runs: distinct seeds, scored (valid or failed), under the track's rules"),
    ("seeds_required", "counted runs needed for an official row"),
    ("provisional", "fewer counted runs than required"),
    ("legacy", "graded under a superseded protocol revision; not ranked"),
    ("protocol_revision", "protocol revision of the row's runs"),
    ("superseded_by", "protocol fix that superseded a legacy row"),
    ("failed", "counted runs with no promoted candidate, or one that failed grading (scored 0)"),
    ("awaiting_rerun", "invalid runs (infrastructure failures) awaiting a rerun"),
    ("repeats", "later scored runs of a seed that already counts: listed, not averaged"),
    ("off_rules", "runs not under the track's rules (budget, limits, exam...): listed apart"),
    ("unverified", "runs whose result file's signature does not hold: listed, never counted"),
    ("bits_per_byte", "mean bits-per-byte on the hidden answer spans"),
    ("best_public", "best public-validation percent over the runs"),
    ("gap", "best public minus mean hidden percent"),
    ("model_free_suspects", "runs whose score survived the weights ablation: under review"),
    ("cost_usd", "mean cost in USD per counted run (empty unless every counted run reported one)"),
    ("tokens", "mean tokens per counted run, every part (empty unless every counted run has some)"),
    ("pareto", "on the track's score-against-cost front (cost, or tokens where cost is unknown)"),
]


def row_record(row: Row, on_front: bool = False) -> dict[str, Any]:
    """A row as flat, JSON-ready values, in `COLUMNS` order; `on_front`: the row is on its
    track's score-against-cost front (`cost.front_keys`)."""
    return {
        "track": row.track,
        "rank": row.rank_label,
        "rank_best": row.rank,
        "rank_worst": row.rank_worst,
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
        "repeats": len(row.repeats),
        "off_rules": len(row.off_rules),
        "unverified": len(row.unverified),
        "bits_per_byte": row.bits_per_byte,
        "best_public": row.best_public,
        "gap": row.gap,
        "model_free_suspects": len(row.model_free_suspects),
        "cost_usd": row.cost_usd,
        "tokens": row.tokens,
        "pareto": on_front,
    }


# A cell starting with one of these is read as a formula by spreadsheets (OWASP, "CSV
# injection"): `=HYPERLINK(...)`, `+1+cmd|...`, `@SUM(...)`, and the tab and carriage return
# that some of them skip before looking.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> object:
    """One CSV cell: empty for None; text that a spreadsheet would read as a formula gets a
    leading single quote (shown as text, never run). Numbers are ours and stay numbers."""
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def to_csv(rows: list[Row]) -> str:
    """CSV with a header; empty cells for undefined values (e.g. SE with one run); text cells
    that would start a spreadsheet formula are quoted (`csv_cell`). Every text cell is in
    double quotes: Python's writer would leave a carriage return inside a cell bare (it
    quotes only the characters of its line terminator), splitting the row for a reader."""
    out = io.StringIO()
    writer = csv.DictWriter(
        out,
        fieldnames=[c for c, _ in COLUMNS],
        lineterminator="\n",
        quoting=csv.QUOTE_NONNUMERIC,
    )
    writer.writeheader()
    front = front_keys(rows)
    for row in rows:
        record = row_record(row, (row.track, row.slug) in front)
        writer.writerow({k: csv_cell(v) for k, v in record.items()})
    return out.getvalue()


def to_json(rows: list[Row], tracks: list[Track]) -> str:
    """JSON: the tracks' frozen parameters, a column glossary and the rows (null = undefined)."""
    front = front_keys(rows)
    doc = {
        "tracks": [t.model_dump(mode="json") for t in tracks],
        "columns": dict(COLUMNS),
        "rows": [row_record(r, (r.track, r.slug) in front) for r in rows],
    }
    return json.dumps(doc, indent=2) + "\n"
