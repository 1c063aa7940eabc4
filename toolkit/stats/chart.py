"""Chart geometry for the site: numbers only, so that templates draw inline SVG with no library.

Two charts: the leaderboard's means with ±SE error bars, and a run's candidates over time
(public-validation score against minutes elapsed, the promoted candidate marked). Pure
functions of the data; the jinja templates turn the coordinates into `<svg>` elements.
"""

from __future__ import annotations

from pydantic import BaseModel

from toolkit.results.model import RunResult
from toolkit.stats.board import Row


class Tick(BaseModel):
    """An axis tick: its position and its label."""

    pos: float
    label: str


class Bar(BaseModel):
    """One row of the means chart."""

    label: str
    slug: str
    y: float
    x_mean: float
    x_low: float
    x_high: float
    mean: float
    se: float | None
    provisional: bool
    legacy: bool
    rank_label: str


class MeansChart(BaseModel):
    """A horizontal dot plot: one line per row, a dot at the mean, a bar over mean ± SE."""

    width: float
    height: float
    left: float
    right: float
    top: float
    bars: list[Bar]
    ticks: list[Tick]
    legacy_y: float | None  # where the legacy rows' divider goes, when there are any


class Point(BaseModel):
    """One candidate on the timeline."""

    id: str
    x: float
    y: float
    score: float
    minutes: float
    promoted: bool


class TimelineChart(BaseModel):
    """A run's candidates: minutes elapsed (x) against public-validation score (y)."""

    width: float
    height: float
    left: float
    right: float
    top: float
    bottom: float
    points: list[Point]
    x_ticks: list[Tick]
    y_ticks: list[Tick]
    deadline_x: float
    path: str  # SVG polyline points "x,y x,y ..." joining the candidates in order


def means_chart(rows: list[Row], width: float = 760, row_height: float = 26) -> MeansChart:
    """Geometry for every row that has a mean (legacy rows included, drawn apart)."""
    left, right, top = 250.0, width - 24.0, 34.0

    def x(percent: float) -> float:
        return left + (right - left) * min(max(percent, 0.0), 100.0) / 100.0

    bars = []
    legacy_y = None
    y = top
    for row in (r for r in rows if r.mean is not None):
        if row.legacy and legacy_y is None:  # legacy rows come last, below a divider
            legacy_y = y + row_height * 0.2
            y += row_height
        mean = row.mean or 0.0
        se = row.se or 0.0
        y += row_height
        bars.append(
            Bar(
                label=row.label,
                slug=row.slug,
                y=y - row_height * 0.5,
                x_mean=x(mean),
                x_low=x(mean - se),
                x_high=x(mean + se),
                mean=mean,
                se=row.se,
                provisional=row.provisional,
                legacy=row.legacy,
                rank_label=row.rank_label,
            )
        )
    ticks = [Tick(pos=x(p), label=f"{p}%") for p in range(0, 101, 20)]
    return MeansChart(
        width=width,
        height=y + 12,
        left=left,
        right=right,
        top=top,
        bars=bars,
        ticks=ticks,
        legacy_y=legacy_y,
    )


def timeline_chart(run: RunResult, width: float = 640, height: float = 220) -> TimelineChart:
    """Geometry of a run's candidates over its budget; unscored candidates sit at 0."""
    left, right, top, bottom = 48.0, width - 34.0, 14.0, height - 34.0
    budget_min = max(run.timings.budget_s / 60.0, 1e-9)

    def x(minutes: float) -> float:
        return left + (right - left) * min(max(minutes / budget_min, 0.0), 1.0)

    def y(percent: float) -> float:
        return bottom - (bottom - top) * percent / 100.0

    promoted = run.promoted.id if run.promoted else None
    points = []
    for c in run.candidates:
        score = c.public_score if c.public_score is not None else 0.0
        minutes = c.elapsed_s / 60.0
        points.append(
            Point(
                id=c.id,
                x=x(minutes),
                y=y(score),
                score=score,
                minutes=minutes,
                promoted=c.id == promoted,
            )
        )
    step = _nice_step(budget_min)
    x_ticks = [Tick(pos=x(m), label=f"{m:g} min") for m in _frange(0.0, budget_min + 1e-9, step)]
    y_ticks = [Tick(pos=y(p), label=f"{p}%") for p in (0, 25, 50, 75, 100)]
    return TimelineChart(
        width=width,
        height=height,
        left=left,
        right=right,
        top=top,
        bottom=bottom,
        points=points,
        x_ticks=x_ticks,
        y_ticks=y_ticks,
        deadline_x=x(budget_min),
        path=" ".join(f"{p.x:.1f},{p.y:.1f}" for p in points),
    )


def _nice_step(span: float) -> float:
    """A round tick step giving about 4 to 8 ticks over `span`."""
    for step in (0.25, 0.5, 1, 2, 5, 10, 15, 20, 30, 60, 120, 240, 480):
        if span / step <= 8:
            return float(step)
    return span / 6


def _frange(start: float, stop: float, step: float) -> list[float]:
    count = int((stop - start) / step) + 1
    return [round(start + i * step, 6) for i in range(count)]
