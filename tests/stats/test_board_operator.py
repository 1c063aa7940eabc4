"""What the board says about runs the operator shaped (issue 29 items 1 and 3).

A run killed with `toolkit runs kill` is not an infrastructure failure, and a run that ran into
a spend cap the operator lowered below the track's is not under the track's rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from results_factory import run_dict, track_dict, write_registry, write_run

from toolkit.stats import Row, leaderboard, load_results


def _board(tmp_path: Path, runs: list[dict[str, Any]]) -> list[Row]:
    results = tmp_path / "results"
    write_registry(results, [track_dict(max_tokens_total=100_000_000, max_cost_usd=250.0)])
    for run in runs:
        write_run(results, run)
    return leaderboard(load_results(results), "v1-test")


def _note(row: Row, run_id: str) -> str:
    return next(e.note or "" for e in row.runs if e.run_id == run_id)


def test_a_killed_run_is_not_called_an_infrastructure_failure(tmp_path: Path) -> None:
    runs = [
        run_dict("r0", seed=0),
        run_dict("killed", seed=1, status="invalid", interrupted=True),
        run_dict("broke", seed=2, status="invalid"),
    ]
    (row,) = _board(tmp_path, runs)
    assert "infrastructure failure" not in _note(row, "killed")
    assert "stopped from outside" in _note(row, "killed")
    assert "infrastructure failure" in _note(row, "broke")


def _capped(tokens: int | None, spent: bool, cost: float | None = 250.0) -> dict[str, Any]:
    return {"max_tokens_total": tokens, "max_cost_usd": cost, "budget_spent": spent}


def test_a_lowered_token_cap_that_ran_out_is_listed_apart(tmp_path: Path) -> None:
    """`--max-tokens-total 3000` stopped the run one call over: its `failed` is the
    operator's doing, so it must not count as a 0 in the model's row."""
    runs = [
        run_dict("ok", seed=0, passed=60, usage=_capped(100_000_000, False)),
        run_dict("capped", seed=1, status="failed", passed=0, usage=_capped(3000, True)),
        run_dict("lowered-unused", seed=2, passed=40, usage=_capped(5000, False)),
        run_dict("track-cap", seed=3, passed=0, status="failed", usage=_capped(100_000_000, True)),
    ]
    (row,) = _board(tmp_path, runs)
    apart = {e.run_id: e.note or "" for e in row.off_rules}
    assert set(apart) == {"capped"}, apart
    assert "token budget lowered to 3000 and spent (track: 1e+08)" in apart["capped"]
    assert row.n == 3 and row.mean == (60 + 40 + 0) / 3


def test_a_lowered_cost_cap_that_ran_out_is_listed_apart(tmp_path: Path) -> None:
    runs = [run_dict("c", seed=0, usage=_capped(100_000_000, True, cost=0.5))]
    (row,) = _board(tmp_path, runs)
    assert [e.run_id for e in row.off_rules] == ["c"]
    assert "cost budget (USD) lowered to 0.5" in (row.off_rules[0].note or "")
