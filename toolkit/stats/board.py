"""Rows, seed statistics and the overlap-aware rank (DESIGN §7).

A row is (track, model, reasoning effort). Its score is the mean of the hidden-exam percent over
its `valid` and `failed` runs (a failed run scores 0: the agent earned nothing), with the
standard error: sample standard deviation (ddof=1) divided by sqrt(n). `invalid` runs are
infrastructure failures: they are listed as awaiting rerun and never enter a mean.

Runs graded under a superseded protocol revision are *legacy*: they form their own rows (one per
revision), linked to the protocol fix that superseded them, and are never ranked.

Ranking. A row's interval is [mean - SE, mean + SE]; its rank is 1 + the number of rows whose
interval lies entirely above its own (lower end strictly greater than this row's upper end;
touching intervals overlap). Rows that share a rank are ties, shown as "=2". With one run the
SE is undefined: we show it as such, and for ranking the row's interval is the single point
(its mean). We chose that over "an interval of unknown width overlaps everything" because the
latter ties every single-seed row at rank 1, which says nothing; the row is labelled
provisional instead, which is what the protocol asks for. Rows with no scored run yet (only
invalid runs) have no rank.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any, Literal, cast

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, computed_field

from toolkit.stats.loading import ResultsSet
from toolkit.tracks import ProtocolFix, Track

_NO_EFFORT = ""  # group key for runs without an effort setting (pandas drops None keys)


class Row(BaseModel):
    """One leaderboard row: a (track, model, effort) and the statistics of its runs."""

    model_config = ConfigDict(frozen=True)

    track: str = Field(description="Track id.")
    model: str = Field(description="Model under test.")
    effort: str | None = Field(description="Reasoning effort; None when the model has none.")
    slug: str = Field(description="Stable, URL-safe id of the row within its track.")
    legacy: bool = Field(description="Graded under a superseded protocol revision; not ranked.")
    protocol_revision: int = Field(description="Protocol revision of the row's runs.")
    superseded_by: str | None = Field(description="Id of the fix that superseded a legacy row.")
    fix_action: Literal["rerun", "legacy"] | None = Field(description="That fix's action.")
    n: int = Field(description="Scored runs (valid + failed).")
    seeds_required: int = Field(description="Scored runs needed for a non-provisional row.")
    failed: int = Field(description="Scored runs that failed (each scored 0).")
    mean: float | None = Field(description="Mean hidden-exam percent; None when n = 0.")
    se: float | None = Field(description="Standard error of the mean; None when n < 2.")
    rank: int | None = Field(description="Overlap-aware rank; None for legacy or unscored rows.")
    tied: bool = Field(description="Another row shares this rank.")
    bits_per_byte: float | None = Field(description="Mean bits-per-byte over scored runs.")
    best_public: float | None = Field(description="Best public-validation percent of any run.")
    awaiting_rerun: list[str] = Field(description="Invalid runs (ids) awaiting a rerun.")
    run_ids: list[str] = Field(description="All runs of the row, by seed.")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def provisional(self) -> bool:
        """Fewer scored runs than the track requires."""
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
        """The rank as shown: '3', '=2' for a tie, '' when unranked."""
        if self.rank is None:
            return ""
        return f"={self.rank}" if self.tied else str(self.rank)

    @property
    def label(self) -> str:
        """'model (effort)' or just 'model'."""
        return f"{self.model} ({self.effort})" if self.effort else self.model


def overlap_ranks(low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Rank = 1 + number of intervals lying entirely above each interval (strictly)."""
    above = low[np.newaxis, :] > high[:, np.newaxis]  # above[i, j]: row j entirely above row i
    ranks: np.ndarray = 1 + above.sum(axis=1)
    return ranks


def _slug(model: str, effort: str | None, revision: int | None) -> str:
    text = f"{model}-{effort}" if effort else model
    if revision is not None:
        text += f"-legacy-r{revision}"
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "row"
    return slug


def _superseding_fix(track: Track, fixes: list[ProtocolFix], revision: int) -> ProtocolFix | None:
    later = [f for f in fixes if f.track == track.id and f.revision > revision]
    return min(later, key=lambda f: f.revision) if later else None


def _frame(results: ResultsSet, track: Track) -> pd.DataFrame:
    records = []
    for loaded in results.runs_of(track.id):
        run = loaded.result
        records.append(
            {
                "run_id": run.run_id,
                "model": run.model,
                "effort": run.effort or _NO_EFFORT,
                "seed": run.seed,
                "status": run.status,
                "percent": run.score.percent,
                "bpb": run.bits_per_byte if run.bits_per_byte is not None else math.nan,
                "public": run.best_public_score if run.best_public_score is not None else math.nan,
                "revision": run.config.protocol_revision,
            }
        )
    columns = ["run_id", "model", "effort", "seed", "status", "percent", "bpb", "public"]
    return pd.DataFrame.from_records(records, columns=[*columns, "revision"])


def _opt(value: float) -> float | None:
    return None if math.isnan(value) else float(value)


def leaderboard(results: ResultsSet, track: Track | str) -> list[Row]:
    """The rows of one track: ranked rows by rank, then unscored rows, then legacy rows."""
    if isinstance(track, str):
        track = results.tracks[track]
    df = _frame(results, track)
    if df.empty:
        return []
    df = df.sort_values(["seed", "run_id"], kind="stable")
    df["legacy_rev"] = np.where(df["revision"] < track.protocol_revision, df["revision"], 0)
    scored = df["status"] != "invalid"
    keys = ["model", "effort", "legacy_rev"]
    grouped = df.groupby(keys, sort=True)
    run_ids = grouped["run_id"].agg(list)
    invalid = df[~scored].groupby(keys)["run_id"].agg(list)
    s = df[scored].groupby(keys)
    stats = pd.DataFrame(
        {
            "n": s["percent"].count(),
            "mean": s["percent"].mean(),
            "sd": s["percent"].std(ddof=1),
            "failed": s["status"].agg(lambda st: int((st == "failed").sum())),
            "bpb": s["bpb"].mean(),
            "public": s["public"].max(),
        }
    ).reindex(run_ids.index)

    by_key: dict[Any, dict[Any, Any]] = stats.to_dict("index")
    invalid_ids: dict[Any, list[str]] = invalid.to_dict()

    rows: list[Row] = []
    used: set[str] = set()
    for key, ids in run_ids.to_dict().items():
        model, effort, legacy_rev = cast(tuple[str, str, int], key)
        st = by_key[key]
        n = 0 if math.isnan(st["n"]) else int(st["n"])
        mean = _opt(st["mean"]) if n else None
        se = float(st["sd"]) / math.sqrt(n) if n >= 2 else None
        fix = _superseding_fix(track, results.fixes, int(legacy_rev)) if legacy_rev else None
        slug = _slug(str(model), str(effort) or None, int(legacy_rev) or None)
        if slug in used:  # two spellings that slugify alike: keep both pages apart
            slug += "-" + hashlib.sha256(repr(key).encode()).hexdigest()[:6]
        used.add(slug)
        rows.append(
            Row(
                track=track.id,
                model=str(model),
                effort=str(effort) or None,
                slug=slug,
                legacy=bool(legacy_rev),
                protocol_revision=int(legacy_rev) or track.protocol_revision,
                superseded_by=fix.id if fix else None,
                fix_action=fix.action if fix else None,
                n=n,
                seeds_required=track.seeds_required,
                failed=0 if math.isnan(st["failed"]) else int(st["failed"]),
                mean=mean,
                se=se,
                rank=None,
                tied=False,
                bits_per_byte=_opt(st["bpb"]) if n else None,
                best_public=_opt(st["public"]) if n else None,
                awaiting_rerun=list(invalid_ids.get(key, [])),
                run_ids=list(ids),
            )
        )
    return _rank(rows)


def _rank(rows: list[Row]) -> list[Row]:
    ranked = [r for r in rows if not r.legacy and r.mean is not None]
    if ranked:
        mean = np.array([r.mean for r in ranked], dtype=float)
        se = np.array([r.se or 0.0 for r in ranked], dtype=float)
        ranks = overlap_ranks(mean - se, mean + se)
        counts = np.bincount(ranks)
        ranked = [
            r.model_copy(update={"rank": int(k), "tied": bool(counts[k] > 1)})
            for r, k in zip(ranked, ranks, strict=True)
        ]
        ranked.sort(key=lambda r: (r.rank, -(r.mean or 0.0), r.model, r.effort or ""))
    unscored = [r for r in rows if not r.legacy and r.mean is None]
    legacy = [r for r in rows if r.legacy]
    legacy.sort(key=lambda r: (-r.protocol_revision, -(r.mean or -1.0), r.model))
    return ranked + unscored + legacy
