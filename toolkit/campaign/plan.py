"""The runs a campaign implies, and where each one stands in the results folder.

A run is identified by its key (track, model, effort, seed). A result counts for a key only
when it was made the way this campaign makes it: same agent, same budget (a demo campaign with
an overridden budget and one without do not count for each other) and the track's current
protocol revision (a run graded under a superseded one is legacy: it is redone).

States of a key, from its results:

    valid / failed   done (a failed run scores what it earned; it is never retried)
    missing          no result yet
    rerun            only `invalid` results, fewer than the campaign's attempts: run again
    exhausted        `attempts` invalid results: the campaign gives up; look at the reasons
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from toolkit.campaign.config import CampaignFile, seeds_of
from toolkit.results.model import ResultsError, RunResult, load_run
from toolkit.tracks.model import Track

KeyState = Literal["valid", "failed", "missing", "rerun", "exhausted"]
TO_RUN: tuple[KeyState, ...] = ("missing", "rerun")


@dataclass(frozen=True)
class RunKey:
    """What identifies a run of a campaign."""

    track: str
    model: str
    effort: str | None
    seed: int

    def label(self) -> str:
        effort = f"/{self.effort}" if self.effort else ""
        return f"{self.model}{effort} s{self.seed}"

    def slug(self) -> str:
        """A file name for this key (claims, logs), unique per key."""
        raw = f"{self.track}__{self.model}__{self.effort or '-'}__s{self.seed}"
        return "".join(c if c.isalnum() or c in "._-" else "_" for c in raw)

    def sort_key(self) -> tuple[str, str, str, int]:
        return (self.track, self.model, self.effort or "", self.seed)


@dataclass
class KeyPlan:
    """One key, its results so far and what the campaign will do with it."""

    key: RunKey
    state: KeyState
    results: list[tuple[Path, RunResult]] = field(default_factory=list)

    @property
    def invalid_count(self) -> int:
        """Attempts used: invalid results the harness judged so itself. A run stopped from
        outside (operator, signal, its driver dying) is rerun without using one."""
        return sum(1 for _, r in self.results if r.status == "invalid" and not r.interrupted)

    @property
    def done(self) -> tuple[Path, RunResult] | None:
        return next(((p, r) for p, r in self.results if r.status != "invalid"), None)


def keys_of(campaign: CampaignFile, track: Track) -> list[RunKey]:
    """Every key the campaign implies, in the order it runs them: seed by seed, the models
    interleaved, so that the runs going at once use many models (and so many providers' rate
    limits), and every row has its first seed early."""
    return [
        RunKey(track=track.id, model=m.name, effort=effort, seed=seed)
        for seed in seeds_of(campaign, track)
        for effort_index in range(max(len(m.effort_list()) for m in campaign.models))
        for m in campaign.models
        for effort in m.effort_list()[effort_index : effort_index + 1]
    ]


def effective_budget(campaign: CampaignFile, track: Track) -> float:
    return campaign.budget_s if campaign.budget_s is not None else track.budget_s


def counts_for(result: RunResult, campaign: CampaignFile, track: Track) -> bool:
    """Whether an existing result was made the way this campaign makes its runs."""
    return (
        result.agent == campaign.agent
        and result.config.protocol_revision == track.protocol_revision
        and math.isclose(result.timings.budget_s, effective_budget(campaign, track), rel_tol=1e-9)
    )


def state_of(results: list[tuple[Path, RunResult]], attempts: int) -> KeyState:
    statuses = [r.status for _, r in results]
    if "valid" in statuses:
        return "valid"
    if "failed" in statuses:
        return "failed"
    invalid = statuses.count("invalid")
    if invalid == 0:
        return "missing"
    return "rerun" if invalid < attempts else "exhausted"


class ResultsIndex:
    """The campaign's results in the folder, read once each: a refresh loads new files only.

    A bad result file raises `ResultsError` (one line naming the file and the field)."""

    def __init__(self, campaign: CampaignFile, track: Track) -> None:
        self.campaign = campaign
        self.track = track
        self.keys = keys_of(campaign, track)
        self._keys = set(self.keys)
        self._seen: dict[Path, tuple[RunKey, RunResult] | None] = {}

    def refresh(self) -> None:
        folder = self.campaign.results / self.track.id
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            if path in self._seen:
                continue
            result = load_run(path)
            key = RunKey(result.track, result.model, result.effort, result.seed)
            counts = key in self._keys and counts_for(result, self.campaign, self.track)
            self._seen[path] = (key, result) if counts else None

    def plan(self) -> list[KeyPlan]:
        """Each key of the campaign with its state, from the folder as it is now."""
        self.refresh()
        by_key: dict[RunKey, list[tuple[Path, RunResult]]] = {k: [] for k in self.keys}
        for path, entry in self._seen.items():
            if entry is not None:
                by_key[entry[0]].append((path, entry[1]))
        return [
            KeyPlan(key=key, state=state_of(results, self.campaign.attempts), results=results)
            for key, results in by_key.items()
        ]

    def plan_of(self, key: RunKey) -> KeyPlan:
        return next(p for p in self.plan() if p.key == key)


def make_plan(campaign: CampaignFile, track: Track) -> list[KeyPlan]:
    """Each key of the campaign with its state, from the results folder as it is now."""
    return ResultsIndex(campaign, track).plan()


__all__ = [
    "TO_RUN",
    "KeyPlan",
    "KeyState",
    "ResultsError",
    "ResultsIndex",
    "RunKey",
    "effective_budget",
    "keys_of",
    "make_plan",
]
