"""Seed statistics for the leaderboard: load `results/`, build rows, rank them, export them.

`load_results(dir)` validates the whole folder (registry + per-run files) and
`leaderboard(results, track)` turns one track's runs into ranked `Row`s (DESIGN §7). The CLI
(`toolkit leaderboard`) and the site's mkdocs hook both read through here.
"""

from toolkit.stats.board import Row, leaderboard, overlap_ranks
from toolkit.stats.export import COLUMNS, row_record, to_csv, to_json
from toolkit.stats.loading import LoadedRun, ResultsSet, load_results

__all__ = [
    "COLUMNS",
    "LoadedRun",
    "ResultsSet",
    "Row",
    "leaderboard",
    "load_results",
    "overlap_ranks",
    "row_record",
    "to_csv",
    "to_json",
]
