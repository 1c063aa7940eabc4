"""The site plan's pure pieces: pagination, log pages, pager, chart geometry, page list."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from results_factory import run_dict, track_dict, write_registry, write_run

from toolkit.results.model import RunResult
from toolkit.runner.audit import encode_arg
from toolkit.stats import leaderboard, load_results
from toolkit.stats.chart import means_chart, timeline_chart
from toolkit.stats.log_pages import ShownArg, audit_calls, log_pages, pager, paginate
from toolkit.stats.site_plan import plan_site, root_of, usage_totals


def test_paginate_keeps_every_byte_and_cuts_on_lines() -> None:
    text = "".join(f"line {i}\n" for i in range(1000))
    pages = paginate(text, page_bytes=500)
    assert "".join(pages) == text
    assert all(p.endswith("\n") for p in pages)
    assert all(len(p) <= 500 for p in pages)
    assert paginate("", 10) == [""]
    assert paginate("one very long line without breaks", 5) == ["one very long line without breaks"]


def test_small_logs_share_a_page_large_ones_are_cut() -> None:
    big = "x" * 99 + "\n"
    pages = log_pages([("audit", "a\n"), ("history", "h\n"), ("transcript", big * 30)], 1000)
    assert [s.name for s in pages[0]][:2] == ["audit", "history"]
    parts = [s for p in pages for s in p if s.name == "transcript"]
    assert len(parts) == 3 and [s.part for s in parts] == [1, 2, 3]
    assert "".join(s.text for s in parts) == big * 30
    assert all(sum(len(s.text) for s in p) <= 1000 for p in pages)


def test_pager_shows_ends_neighbours_and_gaps() -> None:
    urls = [f"{i}.html" for i in range(1, 21)]
    labels = [link.label for link in pager(urls, 10, "../")]
    assert labels == ["1", "2", "…", "8", "9", "10", "11", "12", "…", "19", "20"]
    current = [link for link in pager(urls, 10, "../") if link.current]
    assert len(current) == 1 and current[0].url == "../10.html"


def test_root_of() -> None:
    assert root_of("index.md") == ""
    assert root_of("rows/v1/x.md") == "../../"


def test_means_chart_geometry(tmp_path: Path) -> None:
    results = tmp_path / "results"
    write_registry(results, [track_dict()])
    for i, p in enumerate([40, 60]):
        write_run(results, run_dict(f"a{i}", model="a", seed=i, passed=p))
    write_run(results, run_dict("b0", model="b", passed=100))
    write_run(results, run_dict("c0", model="c", status="invalid"))
    chart = means_chart(leaderboard(load_results(results), "v1-test"))
    assert [b.label for b in chart.bars] == ["b", "a"]  # the unscored row is not drawn
    b, a = chart.bars
    assert b.x_mean == chart.right and b.x_low == b.x_high == b.x_mean  # one run: no bar
    span = chart.right - chart.left
    assert a.x_mean == chart.left + span * 0.5
    assert a.x_high - a.x_low == pytest.approx(span * 2 * 10 / 100)  # mean 50 ± SE 10
    assert b.y < a.y  # listed in rank order, top to bottom
    assert [t.label for t in chart.ticks] == ["0%", "20%", "40%", "60%", "80%", "100%"]


def test_timeline_marks_the_promoted_candidate() -> None:
    run = RunResult.model_validate(run_dict("r", public=[10.0, 90.0, 50.0]))
    chart = timeline_chart(run)
    assert [p.promoted for p in chart.points] == [False, False, True]  # the last one
    assert chart.points[1].y < chart.points[2].y < chart.points[0].y  # higher score, higher up
    assert chart.points[0].x < chart.points[1].x < chart.points[2].x <= chart.deadline_x
    assert chart.x_ticks[0].label == "0 min" and chart.x_ticks[-1].label == "60 min"


def test_plan_lists_every_page(tmp_path: Path) -> None:
    results = tmp_path / "results"
    write_registry(results, [track_dict(), track_dict("demo-test", demo=True)])
    write_run(results, run_dict("r0"), artifacts={"transcript": "hi\n"})
    plan = plan_site(load_results(results))
    pages = {p.src_uri for p in plan.pages}
    assert {"index.md", "methodology.md", "leaderboards/v1-test.md", "rows/v1-test/model-a.md"} <= (
        pages
    )
    assert [h.src_uri for h in plan.html_pages] == ["logs/v1-test/r0/1.html"]
    assert [c.src_uri for c in plan.copies] == ["runs/v1-test/r0/transcript"]
    texts = {t.src_uri for t in plan.texts}
    assert "downloads/demo-test.csv" in texts and "downloads/leaderboard.json" in texts
    assert plan.nav[1]["Leaderboards"][1] == {"Test track v1-test": "leaderboards/v1-test.md"}


def test_audit_arguments_that_are_bytes_read_back_exactly() -> None:
    """An argument recorded as {"b64": ...} is shown in bash's $'...' quoting, which passes
    exactly those bytes back; text stays text, and junk is shown as recorded, marked."""
    raw = b"caf\xc3\xa9 \xff\\'\n\x01"
    line = json.dumps({"seq": 1, "argv": ["echo", encode_arg(raw), {"b64": "%%"}, 7]})
    (call,) = audit_calls(line)
    echo, binary, junk, number = call.args
    assert echo == ShownArg("echo")
    assert binary.binary and binary.text == "$'café \\xff\\\\\\'\\n\\x01'"
    assert junk.unreadable and junk.text == '{"b64": "%%"}'
    assert number.unreadable and number.text == "7"
    shown = subprocess.run(["bash", "-c", f"printf %s {binary.text}"], capture_output=True)
    assert shown.stdout == raw
    (refused,) = audit_calls(json.dumps({"seq": 2, "argv": None, "note": "refused: x"}))
    assert refused.args == [] and refused.call == "—"


def test_usage_totals_sum_what_was_reported() -> None:
    def run(run_id: str, **usage: Any) -> RunResult:
        return RunResult.model_validate(run_dict(run_id, usage=usage))

    runs = [
        run("a", input_tokens=10, output_tokens=1, reasoning_tokens=5, cost_usd=0.5),
        run("b", input_tokens=20, cache_read_tokens=100, cache_write_tokens=0),
        run("c"),  # reported nothing
    ]
    totals = usage_totals(runs)
    assert totals.parts == {
        "input_tokens": 30,
        "output_tokens": 1,
        "reasoning_tokens": 5,
        "cache_read_tokens": 100,
        "cache_write_tokens": 0,
        "cost_usd": 0.5,
    }
    assert (totals.reported, totals.runs, totals.tokens) == (2, 3, 136)
    nothing = usage_totals([runs[2]])
    assert nothing.reported == 0 and nothing.tokens is None
    assert set(nothing.parts.values()) == {None}  # not reported is never shown as 0
