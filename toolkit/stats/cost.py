"""What a score cost: each row's mean score (± SE) against its mean cost per run, the rows on
the Pareto front marked (no other row scores at least as much for at most as much), as the
geometry of an SVG chart drawn like the means chart (no script).

The measure is a track's: dollars where some row reported a cost, else tokens; a row that did
not report the measure is left off the chart and named in its caption. Legacy rows (a
superseded protocol) and rows without a mean are never plotted.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from typing import Literal

from pydantic import BaseModel

from toolkit.stats.board import Row
from toolkit.stats.chart import Tick

Measure = Literal["cost_usd", "tokens"]


def measure_of(rows: list[Row]) -> Measure | None:
    """Dollars where some plottable row has a cost, else tokens, else None (nothing to plot)."""
    plottable = [r for r in rows if r.mean is not None and not r.legacy]
    if any(r.cost_usd is not None for r in plottable):
        return "cost_usd"
    if any(r.tokens is not None for r in plottable):
        return "tokens"
    return None


def _plotted(rows: list[Row], measure: Measure) -> list[tuple[Row, float, float]]:
    out = []
    for r in rows:
        x = getattr(r, measure)
        if r.mean is not None and not r.legacy and x is not None:
            out.append((r, float(x), r.mean))
    return out


def pareto_slugs(rows: list[Row]) -> set[str]:
    """The slugs of one track's rows on the front, by its measure (`measure_of`)."""
    measure = measure_of(rows)
    if measure is None:
        return set()
    points = _plotted(rows, measure)
    front = set()
    for row, x, y in points:
        beaten = any(
            (x2 <= x and y2 >= y) and (x2 < x or y2 > y) for other, x2, y2 in points if other != row
        )
        if not beaten:
            front.add(row.slug)
    return front


def front_keys(rows: list[Row]) -> set[tuple[str, str]]:
    """(track, slug) of every row on its track's front, for rows of any tracks."""
    by_track: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        by_track[r.track].append(r)
    return {(t, slug) for t, mine in by_track.items() for slug in pareto_slugs(mine)}


class CostPoint(BaseModel):
    """One row on the chart."""

    label: str
    slug: str
    x: float
    y: float
    y_low: float
    y_high: float
    mean: float
    se: float | None
    value: str  # the measure, as shown: "$1.25" or "12,400 tokens"
    front: bool


class CostChart(BaseModel):
    """Mean score (y) against mean cost per run (x), the front joined by a step line."""

    width: float
    height: float
    left: float
    right: float
    top: float
    bottom: float
    measure: str  # axis words: "mean cost per run (USD)" or "mean tokens per run"
    points: list[CostPoint]
    x_ticks: list[Tick]
    y_ticks: list[Tick]
    front_path: str  # SVG polyline points joining the front, cheapest first
    left_off: list[str]  # rows with a mean but no value of the measure


def _nice(top: float) -> float:
    """A round axis end at or above `top` (1, 2 or 5 times a power of ten)."""
    if top <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(top))
    return float(next(m * power for m in (1, 2, 5, 10) if m * power >= top))


def _shown(value: float, measure: Measure) -> str:
    return f"${value:,.2f}" if measure == "cost_usd" else f"{value:,.0f} tokens"


def cost_chart(rows: list[Row], width: float = 760, height: float = 340) -> CostChart | None:
    """Geometry of one track's chart; None when no row reported cost or tokens."""
    measure = measure_of(rows)
    if measure is None:
        return None
    left, right, top, bottom = 64.0, width - 24.0, 20.0, height - 44.0
    plotted = _plotted(rows, measure)
    x_end = _nice(max(x for _, x, _ in plotted))
    y_end = min(100.0, _nice(max(y + (r.se or 0.0) for r, _, y in plotted)))

    def sx(v: float) -> float:
        return left + (right - left) * v / x_end

    def sy(v: float) -> float:
        return bottom - (bottom - top) * min(max(v, 0.0), y_end) / y_end

    front = pareto_slugs(rows)
    points = [
        CostPoint(
            label=r.label,
            slug=r.slug,
            x=sx(x),
            y=sy(y),
            y_low=sy(y - (r.se or 0.0)),
            y_high=sy(y + (r.se or 0.0)),
            mean=y,
            se=r.se,
            value=_shown(x, measure),
            front=r.slug in front,
        )
        for r, x, y in plotted
    ]
    on_front = sorted((p for p in points if p.front), key=lambda p: p.x)
    steps = []
    for a, b in itertools.pairwise(on_front):
        steps += [f"{a.x:.1f},{a.y:.1f}", f"{b.x:.1f},{a.y:.1f}"]
    if on_front:
        steps.append(f"{on_front[-1].x:.1f},{on_front[-1].y:.1f}")
    x_words = "mean cost per run (USD)" if measure == "cost_usd" else "mean tokens per run"
    return CostChart(
        width=width,
        height=height,
        left=left,
        right=right,
        top=top,
        bottom=bottom,
        measure=x_words,
        points=points,
        x_ticks=[
            Tick(pos=sx(x_end * k / 5), label=_shown(x_end * k / 5, measure).split(" ")[0])
            for k in range(6)
        ],
        y_ticks=[Tick(pos=sy(y_end * k / 5), label=f"{y_end * k / 5:g}%") for k in range(6)],
        front_path=" ".join(steps),
        left_off=[
            r.label
            for r in rows
            if r.mean is not None and not r.legacy and getattr(r, measure) is None
        ],
    )
