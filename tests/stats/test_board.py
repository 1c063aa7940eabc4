"""Seed statistics: mean and SE by hand and vs scipy, provisional, failed, invalid, legacy, rank."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from results_factory import run_dict, track_dict, write_registry, write_run
from scipy import stats as sps

from toolkit.stats import Row, leaderboard, load_results, overlap_ranks


def _board(tmp_path: Path, runs: list[dict], fixes: list[dict] | None = None, **track) -> list[Row]:
    results = tmp_path / "results"
    write_registry(results, [track_dict(**track)], fixes)
    for run in runs:
        write_run(results, run)
    return leaderboard(load_results(results), "v1-test")


@pytest.mark.parametrize("scores", [[37], [20, 30], [10, 20, 60], [5, 17, 23, 40, 71]])
def test_mean_and_se_match_scipy(tmp_path: Path, scores: list[int]) -> None:
    runs = [run_dict(f"r{i}", seed=i, passed=p) for i, p in enumerate(scores)]
    (row,) = _board(tmp_path, runs)
    assert row.n == len(scores)
    assert row.mean == pytest.approx(np.mean(scores))
    if len(scores) == 1:
        assert row.se is None  # undefined with one run, never shown as 0
    else:
        assert row.se == pytest.approx(sps.sem(scores))  # ddof=1 by default
    assert row.provisional == (len(scores) < 3)


def test_hand_computed_three_seeds(tmp_path: Path) -> None:
    # 10, 20, 60: mean 30; deviations -20,-10,30 -> squares 400+100+900=1400; var 1400/2=700;
    # sd = 26.4575; se = sd/sqrt(3) = 15.2753
    runs = [run_dict(f"r{i}", seed=i, passed=p) for i, p in enumerate([10, 20, 60])]
    (row,) = _board(tmp_path, runs)
    assert row.mean == 30.0
    assert row.se == pytest.approx(math.sqrt(700) / math.sqrt(3))
    assert row.se == pytest.approx(15.2753, abs=1e-4)
    assert row.seeds_required == 3 and not row.provisional
    assert row.rank_label == "1"


def test_failed_run_counts_as_zero(tmp_path: Path) -> None:
    runs = [
        run_dict("r0", seed=0, passed=40),
        run_dict("r1", seed=1, passed=0, status="failed", bpb=None),
        run_dict("r2", seed=2, passed=50),
    ]
    (row,) = _board(tmp_path, runs)
    assert row.n == 3 and row.failed == 1
    assert row.mean == pytest.approx(30.0)
    assert row.se == pytest.approx(sps.sem([40, 0, 50]))
    assert row.bits_per_byte == pytest.approx(1.5)  # the failed run has no bpb


def test_invalid_run_is_excluded_and_listed(tmp_path: Path) -> None:
    runs = [
        run_dict("r0", seed=0, passed=40),
        run_dict("r1", seed=1, passed=90, status="invalid"),
        run_dict("r2", seed=2, passed=50),
    ]
    (row,) = _board(tmp_path, runs)
    assert row.n == 2 and row.provisional
    assert row.mean == 45.0
    assert row.awaiting_rerun == ["r1"]
    assert row.run_ids == ["r0", "r1", "r2"]


def test_only_invalid_runs_give_an_unranked_row(tmp_path: Path) -> None:
    runs = [
        run_dict("r0", model="m-ok", passed=10),
        run_dict("r1", model="m-bad", status="invalid"),
    ]
    ok, bad = _board(tmp_path, runs)
    assert ok.rank == 1
    assert bad.model == "m-bad" and bad.n == 0 and bad.mean is None and bad.rank is None
    assert bad.rank_label == "" and bad.awaiting_rerun == ["r1"]


def test_legacy_runs_are_set_apart_and_linked(tmp_path: Path) -> None:
    fix = {
        "id": "fix-selection",
        "track": "v1-test",
        "date": "2026-11-01",
        "title": "Grade the promoted candidate",
        "description": "Earlier runs were graded on the best public candidate.",
        "revision": 2,
        "action": "legacy",
    }
    runs = [
        run_dict("new0", seed=0, passed=30, revision=2),
        run_dict("old0", seed=0, passed=90, revision=1),
        run_dict("old1", seed=1, passed=80, revision=1),
    ]
    current, legacy = _board(tmp_path, runs, [fix], protocol_revision=2)
    assert not current.legacy and current.rank == 1 and current.run_ids == ["new0"]
    assert legacy.legacy and legacy.rank is None and legacy.rank_label == ""
    assert legacy.superseded_by == "fix-selection" and legacy.fix_action == "legacy"
    assert legacy.protocol_revision == 1 and legacy.mean == 85.0
    assert legacy.slug != current.slug


def test_overlapping_intervals_tie(tmp_path: Path) -> None:
    # a: 50, 60 -> 55 +- 5 = [50, 60]; b: 45, 55 -> 50 +- 5 = [45, 55]: overlap -> tie at 1.
    # c: 10, 20 -> 15 +- 5 = [10, 20]: both lie above it -> rank 3.
    runs = [
        run_dict("a0", model="a", seed=0, passed=50),
        run_dict("a1", model="a", seed=1, passed=60),
        run_dict("b0", model="b", seed=0, passed=45),
        run_dict("b1", model="b", seed=1, passed=55),
        run_dict("c0", model="c", seed=0, passed=10),
        run_dict("c1", model="c", seed=1, passed=20),
    ]
    rows = _board(tmp_path, runs)
    assert [(r.model, r.rank_label) for r in rows] == [("a", "=1"), ("b", "=1"), ("c", "3")]


def test_disjoint_intervals_rank_apart(tmp_path: Path) -> None:
    runs = [
        run_dict("a0", model="a", seed=0, passed=80),
        run_dict("a1", model="a", seed=1, passed=82),
        run_dict("b0", model="b", seed=0, passed=40),
        run_dict("b1", model="b", seed=1, passed=42),
        run_dict("c0", model="c", effort="high", seed=0, passed=70),
    ]
    rows = _board(tmp_path, runs)
    assert [(r.label, r.rank_label) for r in rows] == [("a", "1"), ("c (high)", "2"), ("b", "3")]
    assert not any(r.tied for r in rows)


def test_effort_is_part_of_row_identity(tmp_path: Path) -> None:
    runs = [
        run_dict("lo", model="m", effort="low", passed=20),
        run_dict("hi", model="m", effort="high", passed=60),
        run_dict("no", model="m", passed=40),
    ]
    rows = _board(tmp_path, runs)
    assert [(r.effort, r.slug) for r in rows] == [("high", "m-high"), (None, "m"), ("low", "m-low")]


def test_public_best_and_gap(tmp_path: Path) -> None:
    runs = [
        run_dict("r0", seed=0, passed=16, public=[50.0, 100.0]),
        run_dict("r1", seed=1, passed=20, public=[70.0]),
    ]
    (row,) = _board(tmp_path, runs)
    assert row.best_public == 100.0
    assert row.gap == pytest.approx(100.0 - 18.0)


def test_overlap_ranks_touching_intervals_overlap() -> None:
    low = np.array([10.0, 20.0, 30.0])
    high = np.array([20.0, 30.0, 40.0])  # neighbours touch (overlap); only 0 and 2 are apart
    assert overlap_ranks(low, high).tolist() == [2, 1, 1]
    low = low + np.array([0.0, 0.1, 0.1])  # now nobody touches: a strict order
    assert overlap_ranks(low, high).tolist() == [3, 2, 1]


def test_rank_counts_rows_above_not_position(tmp_path: Path) -> None:
    # a [70, 80]; b [60, 72] overlaps a; c [50, 62] overlaps b but lies below a.
    # rank(c) = 1 + |{a}| = 2 even though it is listed third: ranks count rows above, not places.
    runs = [
        run_dict("a0", model="a", seed=0, passed=70),
        run_dict("a1", model="a", seed=1, passed=80),
        run_dict("b0", model="b", seed=0, passed=60),
        run_dict("b1", model="b", seed=1, passed=72),
        run_dict("c0", model="c", seed=0, passed=50),
        run_dict("c1", model="c", seed=1, passed=62),
    ]
    rows = _board(tmp_path, runs)
    assert [(r.model, r.rank_label) for r in rows] == [("a", "=1"), ("b", "=1"), ("c", "2")]


def test_a_track_with_only_invalid_runs(tmp_path: Path) -> None:
    runs = [run_dict("r0", status="invalid"), run_dict("r1", seed=1, status="invalid")]
    (row,) = _board(tmp_path, runs)
    assert row.n == 0 and row.mean is None and row.se is None and row.rank is None
    assert row.awaiting_rerun == ["r0", "r1"] and row.failed == 0 and row.gap is None


def test_a_track_without_runs(tmp_path: Path) -> None:
    assert _board(tmp_path, []) == []
