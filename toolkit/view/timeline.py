"""The live run page's timeline: the run's hour on one line, as an SVG (runner calls, calls in
flight, submissions with their public scores, the promotion, the reserved window, *now*, and
ticks along the budget). Every text in it that the agent wrote is escaped."""

from __future__ import annotations

import contextlib
import html
import json
from pathlib import Path

from toolkit.run import journal
from toolkit.run.artifacts import AUDIT_FILE
from toolkit.run.history import HISTORY_FILE

WIDTH = 1000  # px of the timeline


def read_jsonl(path: Path) -> list[dict[str, object]]:
    """The JSON objects of a JSON-lines file (a bad line, or a missing file, is skipped)."""
    out: list[dict[str, object]] = []
    with contextlib.suppress(OSError):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                item = json.loads(line)
                if isinstance(item, dict):
                    out.append(item)
    return out


TICK_STEPS_S = (10, 30, 60, 120, 300, 600, 900, 1800, 3600)
MAX_TICKS = 8


def axis_ticks(budget: float) -> list[float]:
    """Seconds to mark on the timeline's axis: 0, every step of a round size that gives at
    most `MAX_TICKS` marks, and the budget."""
    step = next((s for s in TICK_STEPS_S if budget / s <= MAX_TICKS), TICK_STEPS_S[-1])
    ticks = [float(t) for t in range(0, int(budget), step)]
    if budget - ticks[-1] < step / 2 and len(ticks) > 1:  # too close to the end to read
        ticks.pop()
    return [*ticks, budget]


def _tick_label(seconds: float) -> str:
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


def _x(seconds: float, budget: float) -> float:
    return round(WIDTH * max(0.0, min(seconds, budget)) / budget, 1)


def timeline_svg(
    entry: journal.Entry,
    now_s: float,
    reserved_s: float,
    in_flight: list[tuple[float, str]] | None = None,
    *,
    live: bool = True,
) -> str:
    """The hour on one line: runner calls (those `in_flight`, as (start, name), drawn up to
    now), submissions, promotion, reserved window, ticks along the budget, and *now* while the
    run is `live` (a finished run has no now: its line would sit at the end of its clock)."""
    budget = max(entry.budget_s, 1.0)
    artifacts = Path(entry.artifacts)
    parts = [
        f'<svg class="timeline" width="{WIDTH}" height="90" viewBox="0 0 {WIDTH} 90" '
        'xmlns="http://www.w3.org/2000/svg" role="img" aria-label="timeline of the run">',
        f'<rect x="0" y="20" width="{WIDTH}" height="30" fill="#eef"/>',
    ]
    if reserved_s > 0:
        x = _x(budget - reserved_s, budget)
        parts.append(
            f'<rect class="reserved" x="{x}" y="20" width="{WIDTH - x}" height="30" '
            'fill="#fdd"><title>reserved window: submit and promote only</title></rect>'
        )
    for call in read_jsonl(artifacts / AUDIT_FILE):
        start, end = call.get("start_s"), call.get("end_s")
        if not isinstance(start, int | float) or not isinstance(end, int | float):
            continue
        argv = call.get("argv") or []
        name = (
            " ".join(a for a in argv if isinstance(a, str))[:120] if isinstance(argv, list) else ""
        )
        x0, x1 = _x(start, budget), _x(end, budget)
        parts.append(
            f'<rect class="call" x="{x0}" y="24" width="{max(1.0, x1 - x0)}" height="22" '
            f'fill="#58a"><title>runner {html.escape(name)} ({start:.0f}-{end:.0f}s, exit '
            f"{html.escape(str(call.get('exit_code')))})</title></rect>"
        )
    for start, name in in_flight or []:
        x0, x1 = _x(start, budget), _x(now_s, budget)
        parts.append(
            f'<rect class="call live" x="{x0}" y="24" width="{max(2.0, x1 - x0)}" height="22" '
            f'fill="#8bd" stroke="#58a" stroke-dasharray="4 2"><title>runner '
            f"{html.escape(name)} (since {start:.0f}s, running)</title></rect>"
        )
    scores: dict[str, object] = {}
    history = read_jsonl(artifacts / HISTORY_FILE)
    for e in history:
        if e.get("kind") == "public":
            scores[str(e.get("id"))] = e.get("public_score")
    for e in history:
        elapsed = e.get("elapsed_s")
        if not isinstance(elapsed, int | float):
            continue
        x = _x(elapsed, budget)
        cid = html.escape(str(e.get("id")))
        if e.get("kind") == "submit":
            score = scores.get(str(e.get("id")))
            shown = "no public score" if score is None else f"public {score}%"
            parts.append(
                f'<circle class="submit" cx="{x}" cy="12" r="5" fill="#2a2"><title>submitted '
                f"{cid} at {elapsed:.0f}s: {html.escape(shown)}</title></circle>"
            )
        elif e.get("kind") == "promote":
            parts.append(
                f'<path class="promote" d="M{x - 6},64 L{x + 6},64 L{x},54 Z" fill="#d80">'
                f"<title>promoted {cid} at {elapsed:.0f}s</title></path>"
            )
    if live:
        x = _x(now_s, budget)
        parts.append(f'<line class="now" x1="{x}" y1="14" x2="{x}" y2="56" stroke="#c00"/>')
    for tick in axis_ticks(budget):
        x, anchor = _x(tick, budget), "start" if tick == 0 else "middle"
        anchor = "end" if tick == budget else anchor
        parts.append(f'<line class="tick" x1="{x}" y1="50" x2="{x}" y2="68" stroke="#888"/>')
        parts.append(
            f'<text class="tick" x="{x}" y="82" font-size="12" text-anchor="{anchor}">'
            f"{_tick_label(tick)}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)
