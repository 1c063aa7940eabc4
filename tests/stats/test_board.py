"""Seed statistics: mean and SE (by hand and vs scipy), which runs count, and rank ranges."""

from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from results_factory import run_dict, track_dict, write_registry, write_run
from scipy import stats as sps

from toolkit.stats import Interval, Row, exact_interval, leaderboard, load_results, rank_ranges


def _board(tmp_path: Path, runs: list[dict], fixes: list[dict] | None = None, **track) -> list[Row]:
    results = tmp_path / "results"
    write_registry(results, [track_dict(**track)], fixes)
    for run in runs:
        write_run(results, run)
    return leaderboard(load_results(results), "v1-test")


def _labels(rows: list[Row]) -> list[tuple[str, str]]:
    return [(r.label, r.rank_label) for r in rows]


# --- mean and standard error ------------------------------------------------------------------


@pytest.mark.parametrize("scores", [[37], [20, 30], [10, 20, 60], [5, 17, 23, 40, 71]])
def test_mean_and_se_match_scipy(tmp_path: Path, scores: list[int]) -> None:
    runs = [run_dict(f"r{i}", seed=i, passed=p) for i, p in enumerate(scores)]
    (row,) = _board(tmp_path, runs)
    assert row.n == len(scores)
    assert row.mean == pytest.approx(sum(scores) / len(scores))
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


def test_exact_interval_is_exact() -> None:
    iv = exact_interval([Fraction(0), Fraction(100, 3), Fraction(50)])
    assert iv.mean == Fraction(250, 9)
    # deviations -250/9, 50/9, 200/9: squares sum 105000/81; /2 -> variance; /3 -> SE²
    assert iv.se2 == Fraction(105000, 81) / 2 / 3
    assert exact_interval([Fraction(7)]).se2 == 0


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


# --- item 1: one run per distinct seed --------------------------------------------------------


def _at(minute: int) -> str:
    return f"2026-11-22T{10 + minute // 60:02d}:{minute % 60:02d}:00Z"


def test_a_seed_counts_once_the_first_scored_run(tmp_path: Path) -> None:
    # Two runs of seed 0: the one started first counts, whatever its id or its score.
    runs = [
        run_dict("z-first", seed=0, passed=20, started_at=_at(0)),
        run_dict("a-later", seed=0, passed=90, started_at=_at(30)),
        run_dict("s1", seed=1, passed=40, started_at=_at(5)),
    ]
    (row,) = _board(tmp_path, runs)
    assert row.n == 2 and row.provisional  # 2 distinct seeds of 3, not "3/3"
    assert row.mean == 30.0  # 20 and 40; the 90 of the repeat is not averaged
    assert [e.run_id for e in row.repeats] == ["a-later"]
    note = row.repeats[0].note or ""
    assert "repeat of seed 0" in note and "z-first" in note
    assert set(row.run_ids) == {"z-first", "a-later", "s1"}  # still listed on the row page


def test_rerunning_a_failed_seed_does_not_replace_it(tmp_path: Path) -> None:
    """Cherry-picking: a failed run is a result; running the seed again must not erase it."""
    runs = [
        run_dict("bad", seed=0, passed=0, status="failed", started_at=_at(0)),
        run_dict("retry", seed=0, passed=80, started_at=_at(10)),
    ]
    (row,) = _board(tmp_path, runs)
    assert row.n == 1 and row.mean == 0.0 and row.failed == 1
    assert [e.run_id for e in row.repeats] == ["retry"]


def test_an_invalid_run_is_rerun_and_the_rerun_counts(tmp_path: Path) -> None:
    runs = [
        run_dict("broken", seed=0, status="invalid", started_at=_at(0)),
        run_dict("rerun", seed=0, passed=30, started_at=_at(20)),
        run_dict("lost", seed=1, status="invalid", started_at=_at(5)),
    ]
    (row,) = _board(tmp_path, runs)
    assert row.n == 1 and row.mean == 30.0
    assert row.awaiting_rerun == ["lost"]  # seed 0 has been rerun, seed 1 has not
    roles = {e.run_id: e.role for e in row.runs}
    assert roles == {"broken": "rerun-done", "rerun": "counted", "lost": "awaiting-rerun"}


def test_seed_order_does_not_depend_on_time_zones(tmp_path: Path) -> None:
    runs = [
        run_dict("utc", seed=0, passed=10, started_at="2026-11-22T10:00:00Z"),
        run_dict("plus2", seed=0, passed=90, started_at="2026-11-22T11:30:00+02:00"),  # 09:30Z
    ]
    (row,) = _board(tmp_path, runs)
    assert row.mean == 90.0 and [e.run_id for e in row.repeats] == ["utc"]


# --- item 2: runs not under the track's rules -------------------------------------------------


def _config(**budget: Any) -> dict[str, Any]:
    run = run_dict("x")
    config = dict(run["config"])
    config["budget"] = {"budget_s": 3600, "per_call_limit_s": 1200, "reserved_s": 300, **budget}
    config["grading"] = {
        "context_bytes": 1024,
        "load_timeout_s": 300,
        "batch_timeout_s": 120,
        "total_timeout_s": 1800,
        "memory_bytes": 32 * 2**30,
        "batch_size": 32,
        "size_limit_bytes": 16_000_000,
        "device": "cuda",
    }
    return config


def _with(config: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    section, key = dotted.split(".")
    config[section] = {**config[section], key: value}
    return config


@pytest.mark.parametrize(
    ("change", "label"),
    [
        (lambda c: _with(c, "budget.budget_s", 20), "budget 20 s (track: 3600 s)"),
        (lambda c: _with(c, "budget.per_call_limit_s", 60), "per-call limit 60 s (track: 1200 s)"),
        (lambda c: _with(c, "budget.reserved_s", 0), "reserved window 0 s (track: 300 s)"),
        (lambda c: _with(c, "grading.context_bytes", 4096), "grading context_bytes 4096"),
        (lambda c: _with(c, "grading.batch_timeout_s", 999), "grading batch_timeout_s 999"),
        (lambda c: _with(c, "grading.size_limit_bytes", 10**9), "grading size_limit_bytes"),
        (lambda c: {**c, "exam_sha256": "ab" * 32}, "exam abababab (track: 3f571c9c)"),
        (lambda c: {**c, "public_set_sha256": "d" * 64}, "public set dddddddd"),
    ],
)
def test_a_run_off_the_tracks_rules_is_listed_apart(
    tmp_path: Path, change: Any, label: str
) -> None:
    runs = [
        run_dict("ok0", seed=0, passed=40, config=_config()),
        run_dict("ok1", seed=1, passed=60, config=_config()),
        run_dict("odd", seed=2, passed=100, config=change(_config())),
    ]
    (row,) = _board(tmp_path, runs)
    assert row.n == 2 and row.mean == 50.0  # never averaged in
    (apart,) = row.off_rules
    assert apart.run_id == "odd" and apart.role == "off-rules"
    assert label in (apart.note or ""), apart.note


def test_demo_budget_override_is_not_averaged_with_full_runs(tmp_path: Path) -> None:
    """The issue's case: a --budget 20 run beside a full 300 s run on the demo track."""
    short = _with(_config(), "budget.budget_s", 20.0)
    short = _with(short, "budget.per_call_limit_s", 12.0)
    runs = [
        run_dict("full", seed=0, passed=5, bpb=5.587, config=_config(budget_s=300.0)),
        run_dict("short", seed=1, passed=1, bpb=8.027, config=short),
    ]
    runs[0]["timings"]["budget_s"] = 300.0
    runs[1]["timings"]["budget_s"] = 20.0
    (row,) = _board(tmp_path, runs, budget_s=300, per_call_limit_s=1200, demo=True)
    assert row.n == 1 and row.mean == 5.0 and row.bits_per_byte == pytest.approx(5.587)
    note = row.off_rules[0].note or ""
    assert "budget 20 s (track: 300 s)" in note and "per-call limit 12 s" in note


def test_a_run_without_recorded_limits_is_compared_on_its_budget(tmp_path: Path) -> None:
    # Hand-made files (like the MLE-bench conversion) record no grading block: not a difference.
    runs = [run_dict("plain", seed=0, passed=40)]
    runs.append(run_dict("short", seed=1, passed=40))
    runs[1]["timings"]["budget_s"] = 60
    (row,) = _board(tmp_path, runs)
    assert [e.run_id for e in row.runs if e.counted] == ["plain"]
    assert "budget 60 s (track: 3600 s)" in (row.off_rules[0].note or "")


def _data(train: str, val: str = "e" * 64) -> dict[str, Any]:
    return {
        "source": "corpus.txt",
        "source_sha256": "f" * 64,
        "train_sha256": train,
        "val_sha256": val,
        "train_bytes": 1000,
        "val_bytes": 10,
    }


def test_pinned_training_data(tmp_path: Path) -> None:
    pinned = "1234abcd" + "0" * 56

    def config(data: dict[str, Any] | None) -> dict[str, Any]:
        return {**run_dict("x")["config"], "train_data": data}

    runs = [
        run_dict("same", seed=0, passed=40, config=config(_data(pinned))),
        run_dict("other", seed=1, passed=90, config=config(_data("9" * 64))),
        run_dict("unknown", seed=2, passed=90, config=config(None)),
    ]
    (row,) = _board(tmp_path, runs, train_data_sha256=pinned[:8])
    assert [e.run_id for e in row.runs if e.counted] == ["same"]
    notes = {e.run_id: e.note or "" for e in row.off_rules}
    assert "training bytes 999999999999" in notes["other"]
    assert "not recorded" in notes["unknown"]


# --- items 3 and 4: rank ranges, compared exactly ---------------------------------------------


def test_chained_overlaps_get_overlapping_ranges(tmp_path: Path) -> None:
    """The methodology page's worked example: A overlaps B, B overlaps C, A lies above C."""
    scores = {"A": [70, 74, 78], "B": [66, 70, 74], "C": [62, 66, 70], "D": [50, 52, 54]}
    runs = [
        run_dict(f"{m}{i}", model=m, seed=i, passed=p)
        for m, ps in scores.items()
        for i, p in enumerate(ps)
    ]
    rows = _board(tmp_path, runs)
    assert _labels(rows) == [("A", "1–2"), ("B", "1–3"), ("C", "2–3"), ("D", "4")]
    assert [(r.rank, r.rank_worst) for r in rows] == [(1, 2), (1, 3), (2, 3), (4, 4)]
    assert [r.tied for r in rows] == [True, True, True, False]


def _iv(low: str, high: str) -> Interval:
    lo, hi = Fraction(low), Fraction(high)
    return Interval((lo + hi) / 2, ((hi - lo) / 2) ** 2)


def test_mle_bench_board_case() -> None:
    """The issue's MLE-bench rows: [58.67, 60.44] was ranked 4 and [53.97, 58.92] 5 although
    they overlap (a row between them overlaps the first and lies above the second)."""
    ivs = [
        _iv("70", "72"),
        _iv("66", "68"),
        _iv("62", "64"),
        _iv("59.00", "61.00"),  # overlaps [58.67, 60.44]; entirely above [53.97, 58.92]
        _iv("58.67", "60.44"),
        _iv("53.97", "58.92"),
    ]
    places = rank_ranges(ivs)
    assert places == [(1, 1), (2, 2), (3, 3), (4, 5), (4, 6), (5, 6)]
    fourth, fifth = places[4], places[5]
    assert fourth[0] <= fifth[1] and fifth[0] <= fourth[1]  # the ranges share a place


def test_touching_intervals_overlap() -> None:
    ivs = [Interval(Fraction(15), Fraction(25)), Interval(Fraction(25), Fraction(25))]
    # [10, 20] and [20, 30] touch at 20: they overlap, so both could be first or second.
    assert rank_ranges(ivs) == [(1, 2), (1, 2)]
    ivs[1] = Interval(Fraction(25) + Fraction(1, 10**12), Fraction(25))  # now they do not touch
    assert rank_ranges(ivs) == [(2, 2), (1, 1)]


@pytest.mark.parametrize("n", [2, 3, 5])
def test_a_row_touching_zero_ties_with_an_all_failed_row(tmp_path: Path, n: int) -> None:
    """n-1 failed runs and one run of x: mean x/n, SE exactly x/n, so the interval touches 0,
    where an all-failed row sits. Floats put the lower end at ~1e-15 and ranked them apart."""
    wrong = []
    for x in range(1, 101):
        iv = exact_interval([Fraction(0)] * (n - 1) + [Fraction(x)])
        assert iv.mean * iv.mean == iv.se2  # lower end exactly 0
        zero = exact_interval([Fraction(0)] * n)
        if rank_ranges([iv, zero]) != [(1, 2), (1, 2)]:
            wrong.append(x)
    assert wrong == []
    # Through files and the whole loader too, for one x.
    runs = [run_dict(f"z{i}", model="zero", seed=i, passed=0, status="failed") for i in range(n)]
    runs += [
        run_dict(f"f{i}", model="one", seed=i, passed=0, status="failed") for i in range(n - 1)
    ]
    runs.append(run_dict("hit", model="one", seed=n - 1, passed=37))
    rows = _board(tmp_path, runs)
    assert _labels(rows) == [("one", "1–2"), ("zero", "1–2")]


def test_random_boards_never_rank_overlapping_rows_apart() -> None:
    rng = random.Random(12)
    for _ in range(200):
        ivs = [
            exact_interval(
                [Fraction(rng.randint(0, 20), 20) * 100 for _ in range(rng.randint(1, 4))]
            )
            for _ in range(rng.randint(2, 7))
        ]
        places = rank_ranges(ivs)
        for (i, a), (j, b) in itertools.combinations(enumerate(ivs), 2):
            overlap = not (a.low > b.high + 1e-9 or b.low > a.high + 1e-9)
            (ab, aw), (bb, bw) = places[i], places[j]
            assert 1 <= ab <= aw <= len(ivs)
            if overlap:
                assert ab <= bw and bb <= aw, (a, b, places[i], places[j])
            elif a.low > b.high:
                assert aw < bb or (ab < bb and aw <= bw)  # a is placed above b


def test_rows_are_listed_by_mean(tmp_path: Path) -> None:
    runs = [
        run_dict("a0", model="a", seed=0, passed=80),
        run_dict("a1", model="a", seed=1, passed=82),
        run_dict("b0", model="b", seed=0, passed=40),
        run_dict("b1", model="b", seed=1, passed=42),
        run_dict("c0", model="c", effort="high", seed=0, passed=70),
    ]
    rows = _board(tmp_path, runs)
    assert _labels(rows) == [("a", "1"), ("c (high)", "2"), ("b", "3")]
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


def test_a_track_with_only_invalid_runs(tmp_path: Path) -> None:
    runs = [run_dict("r0", status="invalid"), run_dict("r1", seed=1, status="invalid")]
    (row,) = _board(tmp_path, runs)
    assert row.n == 0 and row.mean is None and row.se is None and row.rank is None
    assert row.awaiting_rerun == ["r0", "r1"] and row.failed == 0 and row.gap is None


def test_a_track_without_runs(tmp_path: Path) -> None:
    assert _board(tmp_path, []) == []
