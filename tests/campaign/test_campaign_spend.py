"""A campaign's spending caps: the runs together never get more than the campaign allows."""

from __future__ import annotations

from toolkit.campaign.spend import Spent, allowance


def test_the_next_run_gets_what_is_left_after_spend_and_runs_in_flight() -> None:
    spent = Spent(tokens=600, cost_usd=6.0)
    got = allowance((1_000, 10.0), spent, [(100, 1.0)], per_run=(500, 5.0))
    assert (got.tokens, got.cost_usd, got.stop) == (300, 3.0, None)
    roomy = allowance((10_000, None), spent, [], per_run=(500, 5.0))
    assert (roomy.tokens, roomy.cost_usd) == (500, 5.0)  # the per-run budget binds


def test_nothing_left_stops_the_campaign() -> None:
    got = allowance((1_000, None), Spent(900, 0.0), [(100, None)], per_run=(500, None))
    assert got.stop == "the campaign's token budget (1,000) is spent"
    dollars = allowance((None, 10.0), Spent(0, 10.5), [], per_run=(None, None))
    assert dollars.stop == "the campaign's cost budget ($10.00) is spent"


def test_a_run_in_flight_without_a_budget_reserves_the_whole_cap() -> None:
    got = allowance((1_000, None), Spent(0, 0.0), [(None, None)], per_run=(None, None))
    assert got.stop is not None


def test_no_caps_leave_the_per_run_budget() -> None:
    got = allowance((None, None), Spent(10**9, 10**6), [(1, 1.0)], per_run=(7, 2.0))
    assert (got.tokens, got.cost_usd, got.stop) == (7, 2.0, None)
    assert (
        Spent(1234, 0.5).against((10_000, 100.0))
        == "spent 1,234 of 10,000 tokens · $0.50 of $100.00"
    )
