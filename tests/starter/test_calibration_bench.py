"""The calibration benchmark, smallest budget only: it trains, grades and draws its curve."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from tests import benchmark_scripts
from tests.exams import few_per_family
from toolkit.run.inputs import DEMO_BANK, built_exam


def _bench() -> ModuleType:
    return benchmark_scripts.load("bench_calibration")


def test_svg_plot_is_drawn_without_matplotlib(tmp_path: Path) -> None:
    bench = _bench()
    points = [
        bench.Point(
            budget_s=b,
            steps=10 * b,
            bytes_seen=1000 * b,
            train_s=b - 2,
            best_step=10 * b,
            val_bpb=4.0 - b / 20,
            public_percent=b / 2,
            exam_percent=None,
            exam_bpb=5.0 - b / 20,
        )
        for b in (10, 20, 40)
    ]
    path = tmp_path / "c.svg"
    bench.plot_svg(points, path)
    svg = path.read_text()
    assert svg.startswith("<svg") and svg.count("<polyline") == 3  # no exam % to draw
    assert "40" in bench.table(points) and " - " in bench.table(points)


@pytest.mark.slow
def test_smallest_budget_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bench = _bench()
    # The micro preset and 30 s: a few seconds of torch import on a busy machine must still
    # leave time to train; 40 steps end it sooner (a fixed amount of work, seconds on a CPU).
    # Graded on three questions a family: the curve's plumbing, not the exam's size.
    exam = few_per_family(built_exam(DEMO_BANK, "demo"), 3, tmp_path / "exam.jsonl")
    argv = ["--budgets", "30", "--max-steps", "40", "--preset", "micro", "--exam", str(exam)]
    points = bench.main([*argv, "--out", str(tmp_path)])
    (point,) = points
    assert point.bytes_seen > 0 and point.val_bpb is not None
    assert point.public_percent is not None and point.exam_percent is not None
    assert point.exam_bpb is not None and point.exam_bpb > 0
    saved = json.loads((tmp_path / "calibration.json").read_text())
    assert saved[0]["bytes_seen"] == point.bytes_seen
    assert any((tmp_path / name).is_file() for name in ("calibration.png", "calibration.svg"))
    assert "tokens seen" in capsys.readouterr().out
