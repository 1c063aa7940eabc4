"""Rows, seed statistics and the rank range (DESIGN §7).

A row is (track, model, reasoning effort, agent scaffold): runs of one model under two
scaffolds (or a scripted agent recorded under a model's name) never share a row. Which of its
runs count:

- one run per distinct seed: the first scored run (`valid` or `failed`) of a seed, by start
  time, counts; a later scored run of the same seed is a *repeat*, kept on the row's page and
  labelled, never averaged (a rerun exists only for `invalid` runs);
- only runs under the track's rules (`toolkit.stats.rules`): a run whose budget, limits, exam,
  grading parameters or pinned training data differ is listed apart with what differed;
- `invalid` runs (infrastructure failures) never count: awaiting rerun until their seed has a
  counted run;
- only runs whose file is as a pinned key signed it (`toolkit.results.signing`): an *unverified* run
  (unsigned, signed by a key nobody pinned, or changed since) is listed on the row, never
  counted.

The row's score is the mean of the counted runs' exam percent (a failed run scores 0), with the
standard error: sample standard deviation (ddof 1) over sqrt(n). Runs graded under a superseded
protocol revision form *legacy* rows (one per revision), linked to the fix, never ranked.

Ranking. A row's interval is [mean - SE, mean + SE] (a single run: the point at its mean; it is
labelled provisional). Row B lies *entirely above* row A when B's lower end is strictly greater
than A's upper end (touching intervals overlap). A row's rank is the range of places it could
hold: best = 1 + the rows entirely above it, worst = the number of rows not entirely below it.
Two rows whose intervals overlap thus always get overlapping rank ranges, even when each of
them overlaps a third row that the other does not.

Exactness. Scores are passed/total, so means and variances are exact fractions here. Comparing
mean_b - se_b > mean_a + se_a involves square roots; it is decided exactly by squaring (see
`_entirely_above`), after a float comparison that settles every case farther apart than 1e-9
percentage points. Floating point never decides a tie: a row of [0, x] (SE exactly x/2) touches
an all-failed row at 0 exactly, and they overlap.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, computed_field

from toolkit.results.model import RunResult
from toolkit.stats.loading import ResultsSet
from toolkit.stats.rules import TrackRules
from toolkit.tracks.model import ProtocolFix, Track

# Below this float gap between two interval ends, the exact comparison decides.
_FLOAT_MARGIN = 1e-9
# The longest row slug: it names the row's page file (a model name is someone else's text,
# and a file name of more than 255 bytes cannot be written).
SLUG_MAX = 64
DEFAULT_AGENT = "opencode"  # the scaffold of every model row; others are named in the label

RunRole = Literal["counted", "repeat", "off-rules", "awaiting-rerun", "rerun-done", "unverified"]


class RunEntry(BaseModel):
    """One run of a row, and whether (and why not) it counts in the row's statistics."""

    model_config = ConfigDict(frozen=True)

    run_id: str = Field(description="Run id.")
    seed: int = Field(description="Run seed.")
    status: str = Field(description="valid, failed or invalid.")
    role: RunRole = Field(
        description="counted; repeat (a later run of a seed that already counts); off-rules "
        "(not under the track's rules); awaiting-rerun / rerun-done (invalid runs); "
        "unverified (its file's signature does not hold)."
    )
    note: str | None = Field(description="Why the run does not count; None when it counts.")

    @property
    def counted(self) -> bool:
        return self.role == "counted"


class Row(BaseModel):
    """One leaderboard row: a (track, model, effort, agent) and the statistics of its runs."""

    model_config = ConfigDict(frozen=True)

    track: str = Field(description="Track id.")
    model: str = Field(description="Model under test.")
    effort: str | None = Field(description="Reasoning effort; None when the model has none.")
    agent: str = Field(default="opencode", description="Agent scaffold of the row's runs.")
    slug: str = Field(description="Stable, URL-safe id of the row within its track.")
    legacy: bool = Field(description="Graded under a superseded protocol revision; not ranked.")
    protocol_revision: int = Field(description="Protocol revision of the row's runs.")
    superseded_by: str | None = Field(description="Id of the fix that superseded a legacy row.")
    fix_action: Literal["rerun", "legacy"] | None = Field(description="That fix's action.")
    n: int = Field(description="Counted runs: distinct seeds, scored, under the track's rules.")
    seeds_required: int = Field(description="Counted runs needed for a non-provisional row.")
    failed: int = Field(description="Counted runs that failed (each scored 0).")
    mean: float | None = Field(description="Mean hidden-exam percent; None when n = 0.")
    se: float | None = Field(description="Standard error of the mean; None when n < 2.")
    rank: int | None = Field(description="Best place the row could hold; None when unranked.")
    rank_worst: int | None = Field(description="Worst place the row could hold.")
    bits_per_byte: float | None = Field(description="Mean bits-per-byte over counted runs.")
    best_public: float | None = Field(description="Best public-validation percent, counted runs.")
    cost_usd: float | None = Field(
        default=None,
        description="Mean cost in USD per counted run; None unless every counted run reported one.",
    )
    tokens: float | None = Field(
        default=None,
        description="Mean tokens (every part) per counted run; None unless every counted run "
        "reported some.",
    )
    awaiting_rerun: list[str] = Field(description="Invalid runs (ids) awaiting a rerun.")
    runs: list[RunEntry] = Field(description="Every run of the row, by seed, then start time.")
    model_free_suspects: list[str] = Field(
        default_factory=list,
        description="Runs (ids) whose score survived the weights ablation: flagged for a "
        "maintainer's review (the score stands until a reviewer decides).",
    )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def provisional(self) -> bool:
        """Fewer counted runs than the track requires."""
        return self.n < self.seeds_required

    @computed_field  # type: ignore[prop-decorator]
    @property
    def gap(self) -> float | None:
        """Best public-validation percent minus the mean hidden percent (overfitting shows)."""
        if self.best_public is None or self.mean is None:
            return None
        return self.best_public - self.mean

    @computed_field  # type: ignore[prop-decorator]
    @property
    def rank_label(self) -> str:
        """The rank as shown: '3', or '2–5' when the row could hold any of those places."""
        if self.rank is None or self.rank_worst is None:
            return ""
        return str(self.rank) if self.rank == self.rank_worst else f"{self.rank}–{self.rank_worst}"

    @property
    def tied(self) -> bool:
        """Its interval overlaps another row's: its place is a range."""
        return self.rank is not None and self.rank != self.rank_worst

    @property
    def run_ids(self) -> list[str]:
        return [r.run_id for r in self.runs]

    @property
    def repeats(self) -> list[RunEntry]:
        return [r for r in self.runs if r.role == "repeat"]

    @property
    def off_rules(self) -> list[RunEntry]:
        return [r for r in self.runs if r.role == "off-rules"]

    @property
    def unverified(self) -> list[RunEntry]:
        return [r for r in self.runs if r.role == "unverified"]

    @property
    def label(self) -> str:
        """'model (effort)' or just 'model', with the agent when it is not the usual scaffold
        (and the model's name does not already say it)."""
        text = f"{self.model} ({self.effort})" if self.effort else self.model
        return text if _plain_agent(self.agent, self.model) else f"{text} [{self.agent}]"


def _plain_agent(agent: str, model: str) -> bool:
    """Whether a row's agent goes without saying: the default scaffold, or named in the model."""
    return agent == DEFAULT_AGENT or agent in model


@dataclass(frozen=True)
class Interval:
    """A row's interval, exactly: its mean and the square of its standard error."""

    mean: Fraction
    se2: Fraction  # SE squared (0 for a single run: the interval is its mean)

    @property
    def low(self) -> float:
        return float(self.mean) - math.sqrt(self.se2)

    @property
    def high(self) -> float:
        return float(self.mean) + math.sqrt(self.se2)


def _entirely_above(b: Interval, a: Interval) -> bool:
    """Whether b's lower end is strictly above a's upper end: mean_b - mean_a > se_a + se_b.

    With d = mean_b - mean_a, p = se_a², q = se_b² (all exact): for d > 0 the claim is
    d² > p + q + 2·sqrt(pq), i.e. e = d² - p - q > 0 and e² > 4pq. No square root is taken."""
    d = b.mean - a.mean
    if d <= 0:
        return False
    e = d * d - a.se2 - b.se2
    return e > 0 and e * e > 4 * a.se2 * b.se2


def rank_ranges(intervals: list[Interval]) -> list[tuple[int, int]]:
    """(best, worst) place of each interval: best = 1 + intervals entirely above it, worst =
    intervals not entirely below it (itself included).

    Floats settle every pair whose ends are more than `_FLOAT_MARGIN` apart (float error is
    below 1e-12 on percents); the few pairs closer than that are compared exactly."""
    count = len(intervals)
    if not count:
        return []
    low = np.array([iv.low for iv in intervals])
    high = np.array([iv.high for iv in intervals])
    gap = low[np.newaxis, :] - high[:, np.newaxis]  # gap[i, j]: j's low minus i's high
    above = gap > _FLOAT_MARGIN  # above[i, j]: j lies entirely above i
    for i, j in zip(*np.nonzero(np.abs(gap) <= _FLOAT_MARGIN), strict=True):
        above[i, j] = i != j and _entirely_above(intervals[j], intervals[i])
    np.fill_diagonal(above, False)
    n_above = above.sum(axis=1)  # rows entirely above row i
    n_below = above.sum(axis=0)  # rows that row j lies entirely above
    return [(1 + int(n_above[i]), count - int(n_below[i])) for i in range(count)]


def exact_interval(percents: list[Fraction]) -> Interval:
    """Mean and squared standard error (ddof 1) of exact percents; a single value: SE² = 0.

    Computed on integers over a common denominator (sums of Fractions normalise at every
    step, which dominated the statistics of a large board): with x_i = a_i / D,
    mean = Σa / (nD) and SE² = (nΣa² - (Σa)²) / (n²(n-1)D²)."""
    n = len(percents)
    denominator = math.lcm(*(x.denominator for x in percents))
    a = [x.numerator * (denominator // x.denominator) for x in percents]
    total = sum(a)
    mean = Fraction(total, n * denominator)
    if n < 2:
        return Interval(mean, Fraction(0))
    spread = n * sum(v * v for v in a) - total * total
    return Interval(mean, Fraction(spread, n * n * (n - 1) * denominator * denominator))


def percent(run: RunResult) -> Fraction:
    """A run's exam percent, exactly."""
    return Fraction(100 * run.score.passed, run.score.total)


def _slug(model: str, effort: str | None, agent: str, revision: int | None) -> str:
    text = f"{model}-{effort}" if effort else model
    if not _plain_agent(agent, model):
        text += f"-{agent}"
    if revision is not None:
        text += f"-legacy-r{revision}"
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "row"
    if len(slug) > SLUG_MAX:  # a page's file name: cut, and told apart by a hash of the whole
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        slug = f"{slug[: SLUG_MAX - 9].rstrip('-')}-{digest}"
    return slug


def _superseding_fix(track: Track, fixes: list[ProtocolFix], revision: int) -> ProtocolFix | None:
    later = [f for f in fixes if f.track == track.id and f.revision > revision]
    return min(later, key=lambda f: f.revision) if later else None


def _utc(when: datetime) -> datetime:
    """Aware, so that a file without a time zone (read as UTC) still sorts among the others."""
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _entries(
    runs: list[RunResult], rules: TrackRules, unverified: dict[str, str] | None = None
) -> list[RunEntry]:
    """Each run's role in its row (see the module docstring), in (seed, start, id) order.
    `unverified`: run id -> why its file's signature does not hold."""
    runs = sorted(runs, key=lambda r: (r.seed, _utc(r.started_at), r.run_id))
    counted: dict[int, str] = {}  # seed -> the run that counts for it
    entries: list[tuple[RunResult, RunRole, str | None]] = []
    for run in runs:
        differences = rules.differences(run)
        if unverified and run.run_id in unverified:
            entries.append((run, "unverified", f"unverified ({unverified[run.run_id]})"))
        elif differences:
            entries.append(
                (run, "off-rules", "not under the track's rules: " + "; ".join(differences))
            )
        elif run.status == "invalid":
            entries.append((run, "awaiting-rerun", None))  # settled below, once all are known
        elif run.seed in counted:
            first = counted[run.seed]
            repeat = f"repeat of seed {run.seed}: the seed's first scored run, {first}, counts"
            entries.append((run, "repeat", repeat))
        else:
            counted[run.seed] = run.run_id
            entries.append((run, "counted", None))
    out: list[RunEntry] = []
    for run, role, reason in entries:
        note = reason
        if role == "awaiting-rerun":
            rerun = counted.get(run.seed)
            role = "rerun-done" if rerun else "awaiting-rerun"
            # A run stopped from outside (`runs kill`, Ctrl-C) is not an infrastructure failure.
            why = "stopped from outside" if run.interrupted else "infrastructure failure"
            note = (
                f"invalid ({why}): rerun as {rerun}"
                if rerun
                else f"invalid ({why}): awaiting a rerun of its seed"
            )
        out.append(
            RunEntry(run_id=run.run_id, seed=run.seed, status=run.status, role=role, note=note)
        )
    return out


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _run_tokens(run: RunResult) -> int | None:
    """Every token part a run reported, summed (None: it reported none)."""
    u = run.usage
    parts = [u.input_tokens, u.output_tokens, u.reasoning_tokens]
    parts += [u.cache_read_tokens, u.cache_write_tokens]
    known = [p for p in parts if p is not None]
    return sum(known) if known else None


def _mean_of_all(values: list[float | None]) -> float | None:
    """The mean when every value is known (a mean over some runs would understate a row)."""
    known = [v for v in values if v is not None]
    return _mean(known) if values and len(known) == len(values) else None


def _row(
    rules: TrackRules,
    key: tuple[str, str | None, str, int],
    runs: list[RunResult],
    fixes: list[ProtocolFix],
    slug: str,
    unverified: dict[str, str] | None = None,
) -> tuple[Row, Interval | None]:
    model, effort, agent, legacy_rev = key
    track = rules.track
    entries = _entries(runs, rules, unverified)
    by_id = {r.run_id: r for r in runs}
    scored = [by_id[e.run_id] for e in entries if e.counted]
    interval = exact_interval([percent(r) for r in scored]) if scored else None
    fix = _superseding_fix(track, fixes, legacy_rev) if legacy_rev else None
    bpbs = [r.bits_per_byte for r in scored if r.bits_per_byte is not None]
    publics = [r.best_public_score for r in scored if r.best_public_score is not None]
    row = Row(
        track=track.id,
        model=model,
        effort=effort,
        agent=agent,
        slug=slug,
        legacy=bool(legacy_rev),
        protocol_revision=legacy_rev or track.protocol_revision,
        superseded_by=fix.id if fix else None,
        fix_action=fix.action if fix else None,
        n=len(scored),
        seeds_required=track.seeds_required,
        failed=sum(1 for r in scored if r.status == "failed"),
        mean=float(interval.mean) if interval else None,
        se=math.sqrt(interval.se2) if interval and len(scored) >= 2 else None,
        rank=None,
        rank_worst=None,
        bits_per_byte=_mean(bpbs),
        best_public=max(publics) if publics else None,
        cost_usd=_mean_of_all([r.usage.cost_usd for r in scored]),
        tokens=_mean_of_all([_run_tokens(r) for r in scored]),
        awaiting_rerun=[e.run_id for e in entries if e.role == "awaiting-rerun"],
        runs=entries,
        # An unverified file's flag is its own word: it badges nothing of the row.
        model_free_suspects=[
            e.run_id
            for e in entries
            if e.role != "unverified" and by_id[e.run_id].model_free_suspect
        ],
    )
    return row, interval


def leaderboard(results: ResultsSet, track: Track | str) -> list[Row]:
    """The rows of one track: ranked rows by mean, then unscored rows, then legacy rows."""
    if isinstance(track, str):
        track = results.tracks[track]
    groups: dict[tuple[str, str | None, str, int], list[RunResult]] = defaultdict(list)
    unverified: dict[str, str] = {}
    for loaded in results.runs_of(track.id):
        run = loaded.result
        if loaded.unverified is not None:
            unverified[run.run_id] = loaded.unverified
        revision = run.config.protocol_revision
        legacy_rev = revision if revision < track.protocol_revision else 0
        groups[(run.model, run.effort or None, run.agent, legacy_rev)].append(run)
    rows: list[Row] = []
    intervals: list[Interval | None] = []
    slugs = _slugs(groups, unverified)
    rules = TrackRules(track)
    for key in sorted(groups, key=_order):
        row, interval = _row(rules, key, groups[key], results.fixes, slugs[key], unverified)
        rows.append(row)
        intervals.append(interval)
    return _rank(rows, intervals)


_Key = tuple[str, str | None, str, int]


def _order(key: _Key) -> tuple[str, str, str, int]:
    return (key[0], key[1] or "", key[2], key[3])


def _slugs(groups: dict[_Key, list[RunResult]], unverified: dict[str, str]) -> dict[_Key, str]:
    """Each row's slug. Two spellings that slugify alike get pages apart (a hash added to the
    later one); rows with a run whose file holds choose first, so that an unverified file
    never moves a verified row's page."""

    def verified_first(key: _Key) -> tuple[bool, tuple[str, str, str, int]]:
        return (all(r.run_id in unverified for r in groups[key]), _order(key))

    slugs: dict[_Key, str] = {}
    used: set[str] = set()
    for key in sorted(groups, key=verified_first):
        slug = _slug(key[0], key[1], key[2], key[3] or None)
        if slug in used:
            slug += "-" + hashlib.sha256(repr(key).encode()).hexdigest()[:6]
        used.add(slug)
        slugs[key] = slug
    return slugs


def _rank(rows: list[Row], intervals: list[Interval | None]) -> list[Row]:
    ranked = [
        (row, iv)
        for row, iv in zip(rows, intervals, strict=True)
        if iv is not None and not row.legacy
    ]
    places = rank_ranges([iv for _, iv in ranked])
    ranked_rows = [
        (row.model_copy(update={"rank": best, "rank_worst": worst}), iv)
        for (row, iv), (best, worst) in zip(ranked, places, strict=True)
    ]
    ranked_rows.sort(key=lambda p: (-p[1].mean, p[0].model, p[0].effort or "", p[0].agent))
    unscored = [r for r in rows if not r.legacy and r.mean is None]
    legacy = [r for r in rows if r.legacy]
    legacy.sort(key=lambda r: (-r.protocol_revision, -(r.mean or -1.0), r.model))
    return [r for r, _ in ranked_rows] + unscored + legacy
