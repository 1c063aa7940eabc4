"""Seed statistics for the leaderboard: load `results/`, build rows, rank them, export them.

`load_results(dir)` validates the whole folder (registry + per-run files) and
`leaderboard(results, track)` turns one track's runs into `Row`s with rank ranges (DESIGN §7).
The CLI (`toolkit leaderboard`) and the site's mkdocs hook both read through here.
"""

from toolkit.stats.board import Interval, Row, RunEntry, exact_interval, leaderboard, rank_ranges
from toolkit.stats.export import COLUMNS, row_record, to_csv, to_json
from toolkit.stats.loading import LoadedRun, ResultsSet, load_results, results_problems
from toolkit.stats.rules import rule_differences

__all__ = [
    "COLUMNS",
    "Interval",
    "LoadedRun",
    "ResultsSet",
    "Row",
    "RunEntry",
    "exact_interval",
    "leaderboard",
    "load_results",
    "rank_ranges",
    "results_problems",
    "row_record",
    "rule_differences",
    "to_csv",
    "to_json",
]
