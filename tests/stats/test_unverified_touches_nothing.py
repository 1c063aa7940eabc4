"""Issue 50 item 4: the site and `leaderboard` trust only what `runs validate` accepts.

A line added to a signed run's transcript after signing leaves the signature whole and the
file's hash wrong: the run is unverified on the board as in `validate`. An unverified file
(unsigned, or changed) touches nothing of a verified row (its model-free flag, its page's
name, its usage) or of the site's totals (last updated, run counts, agents).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from results_factory import run_dict, track_dict, write_registry, write_run

from toolkit.cli import cli
from toolkit.run.artifacts import file_hashes
from toolkit.stats import leaderboard, load_results
from toolkit.stats.site_plan import agents_used, last_updated, plan_site


def _bound_run(results: Path, run: dict[str, Any], artifacts: dict[str, str]) -> Path:
    """A signed run whose result hashes its run folder's files, as the harness writes it."""
    folder = results / run["track"] / run["run_id"]
    folder.mkdir(parents=True)
    run["artifacts"] = {}
    for name, text in artifacts.items():
        (folder / f"{name}.txt").write_text(text)
        run["artifacts"][name] = f"{run['run_id']}/{name}.txt"
    run["files"] = file_hashes(folder, run["run_id"])
    return write_run(results, run)


def _unsigned(results: Path, run: dict[str, Any]) -> None:
    path = results / run["track"] / f"{run['run_id']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(run))


def _folder(tmp_path: Path) -> Path:
    results = tmp_path / "results"
    write_registry(results, [track_dict()])
    for seed in range(3):
        _bound_run(results, run_dict(f"a{seed}", model="alpha", seed=seed, passed=50 + seed),
                   {"transcript": f"the agent worked, seed {seed}\n"})  # fmt: skip
    return results


def test_a_line_added_after_signing_unverifies_the_run(tmp_path: Path) -> None:
    results = _folder(tmp_path)
    assert leaderboard(load_results(results), "v1-test")[0].n == 3
    with (results / "v1-test" / "a1" / "transcript.txt").open("a") as f:
        f.write("FORGED: the agent solved it all\n")
    loaded = load_results(results, keep_going=True)
    run = loaded.run("a1")
    assert run.unverified is not None and "not as signed" in run.unverified
    assert "transcript.txt" in run.unverified and str(results) not in run.unverified
    row = leaderboard(loaded, "v1-test")[0]
    assert row.n == 2 and [e.run_id for e in row.unverified] == ["a1"]
    board = CliRunner().invoke(cli, ["leaderboard", "--results", str(results)])
    assert "1 unverified run(s)" in board.output and "2/3" in board.output
    check = CliRunner().invoke(cli, ["runs", "validate", str(results)])
    assert check.exit_code == 1 and "a1" in check.stderr and "changed after the run" in check.stderr


def test_an_unverified_file_touches_no_verified_row_or_total(tmp_path: Path) -> None:
    results = _folder(tmp_path)
    before = load_results(results)
    row_before = leaderboard(before, "v1-test")[0]
    # Unsigned, dated 2999, flagged model-free, another agent, the same row (and a spelling
    # that slugs like it, sorted first), with usage of its own.
    forged = run_dict("z0", model="alpha", seed=7, passed=100, started_at="2999-01-01T00:00:00Z",
                      model_free_suspect=True, usage={"cost_usd": 1e6})  # fmt: skip
    forged["agent"] = "forged-agent"
    _unsigned(results, forged)
    _unsigned(results, {**forged, "run_id": "z1", "model": "ALPHA", "agent": "opencode"})
    after = load_results(results)
    row = next(r for r in leaderboard(after, "v1-test") if r.model == "alpha")
    assert row.model_free_suspects == [] and row.slug == row_before.slug == "alpha"
    assert (row.n, row.mean, row.rank_label) == (row_before.n, row_before.mean, "1")
    assert last_updated(after) == last_updated(before) == "2026-11-22"
    assert agents_used(after) == agents_used(before) == ["opencode"]
    plan = plan_site(after)
    home = next(p for p in plan.pages if p.src_uri == "index.md")
    assert home.context["total_runs"] == 3
    board = home.context["boards"]["v1-test"]
    assert board.runs == 3 and board.unverified == 2
    page = next(p for p in plan.pages if p.src_uri == "rows/v1-test/alpha.md")
    assert page.context["usage"].parts["cost_usd"] is None  # the forged cost is in no total
