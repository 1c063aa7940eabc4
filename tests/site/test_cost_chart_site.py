"""What a score cost (issue 51 item 7): per track, each row's mean score (± SE) against its
mean cost per run (tokens where no cost is reported), the Pareto front marked, as an SVG
without script on the leaderboard page, and the same numbers in the CSV/JSON downloads."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from site_fixture import build, run_dict, track_dict, write_registry, write_run

from toolkit.stats import leaderboard, load_results, to_csv
from toolkit.stats.cost import cost_chart, pareto_slugs


def _usage(cost: float | None, tokens: int) -> dict[str, Any]:
    return {"input_tokens": tokens, "output_tokens": 0, "cost_usd": cost}


# model -> (passed per seed, cost per run, tokens per run): c is beaten by b (dearer, worse).
ROWS = {
    "cheap-a": ([10, 12, 14], 0.5, 1000),
    "dear-b": ([40, 42, 44], 4.0, 9000),
    "poor-c": ([20, 22, 24], 5.0, 9500),
    "silent-d": ([30, 30, 30], None, 2000),
}


def _results(tmp_path: Path) -> Path:
    results = tmp_path / "results"
    write_registry(results, [track_dict()])
    for model, (passes, cost, tokens) in ROWS.items():
        for seed, passed in enumerate(passes):
            run = run_dict(f"{model}-{seed}", model=model, seed=seed, passed=passed)
            run["usage"] = _usage(cost, tokens)
            write_run(results, run)
    return results


def test_the_front_and_the_measure(tmp_path: Path) -> None:
    rows = leaderboard(load_results(_results(tmp_path)), "v1-test")
    by_model = {r.model: r for r in rows}
    assert by_model["dear-b"].cost_usd == 4.0 and by_model["silent-d"].cost_usd is None
    assert by_model["silent-d"].tokens == 2000
    assert pareto_slugs(rows) == {by_model["cheap-a"].slug, by_model["dear-b"].slug}
    chart = cost_chart(rows)
    assert chart is not None and chart.measure == "mean cost per run (USD)"
    assert chart.left_off == [by_model["silent-d"].label]
    front = sorted((p for p in chart.points if p.front), key=lambda p: p.x)
    assert [p.label for p in front] == [by_model["cheap-a"].label, by_model["dear-b"].label]
    assert chart.front_path.count(",") == 3  # a, the step's corner, b
    no_cost = [r.model_copy(update={"cost_usd": None}) for r in rows]
    tokens = cost_chart(no_cost)
    assert tokens is not None and tokens.measure == "mean tokens per run"
    assert len(tokens.points) == 4 and tokens.left_off == []
    records = list(csv.DictReader(io.StringIO(to_csv(rows))))
    pareto = {r["model"]: r["pareto"] for r in records}
    assert pareto == {"cheap-a": "True", "dear-b": "True", "poor-c": "False", "silent-d": "False"}
    assert {r["model"]: r["cost_usd"] for r in records}["silent-d"] == ""


def test_the_board_draws_it_without_script_and_the_downloads_carry_it(tmp_path: Path) -> None:
    done = build(_results(tmp_path), tmp_path / "public")
    assert done.returncode == 0, done.stdout + done.stderr
    page = (tmp_path / "public" / "leaderboards" / "v1-test.html").read_text()
    start = page.index('<svg class="ari-cost"')
    svg = page[start : page.index("</svg>", start)]
    assert "<script" not in svg.lower() and "mean cost per run (USD)" in svg
    assert svg.count('class="point front"') == 2 and svg.count('class="point"') == 1
    assert '<polyline class="front"' in svg
    assert "Not plotted (no cost reported)" in page
    data = json.loads((tmp_path / "public" / "downloads" / "v1-test.json").read_text())
    assert {"cost_usd", "tokens", "pareto"} <= set(data["columns"])
    assert {r["model"]: r["pareto"] for r in data["rows"]}["dear-b"] is True
