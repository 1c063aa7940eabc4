"""A row's identity includes its agent scaffold: a scripted agent's runs recorded under a real
model's name (or one model under two scaffolds) never join that model's row."""

from __future__ import annotations

from pathlib import Path

from results_factory import run_dict, track_dict, write_registry, write_run

from toolkit.stats import leaderboard, load_results


def test_runs_of_one_model_under_two_agents_make_two_rows(tmp_path: Path) -> None:
    results = tmp_path / "results"
    write_registry(results, [track_dict()])
    for seed in range(3):
        write_run(results, run_dict(f"real-{seed}", model="gpt-x", seed=seed, passed=10))
        write_run(
            results,
            run_dict(f"fake-{seed}", model="gpt-x", seed=seed, passed=90, agent="scripted"),
        )
    rows = leaderboard(load_results(results), "v1-test")
    by_agent = {r.agent: r for r in rows}
    assert sorted(by_agent) == ["opencode", "scripted"]
    assert by_agent["opencode"].mean == 10.0  # the scripted runs did not lift it
    assert by_agent["scripted"].mean == 90.0
    assert by_agent["opencode"].label == "gpt-x"
    assert by_agent["scripted"].label == "gpt-x [scripted]"
    assert len({r.slug for r in rows}) == 2


def test_the_baseline_row_keeps_its_plain_label(tmp_path: Path) -> None:
    results = tmp_path / "results"
    write_registry(results, [track_dict()])
    write_run(results, run_dict("b0", model="scripted-baseline", agent="scripted"))
    (row,) = leaderboard(load_results(results), "v1-test")
    assert (row.label, row.slug) == ("scripted-baseline", "scripted-baseline")
