"""The campaign driver: what to run, in which order, how often; the engine says where.

    keys to run = the plan's `missing` and `rerun` keys (results folder as it is now)
    for each free slot: claim the next key whose model is below its `max_concurrent` (if
        another campaign holds it, look again later: that campaign finishes it, or gives it
        back), check the folder once more, start it
    for each run that ends: a `valid` or `failed` result is final; an `invalid` result, or no
        result at all, is an infrastructure failure: the key goes to the back of the queue
        until it has had `attempts` of them, then the campaign gives up on it
    stop when nothing is queued or running (or on Ctrl-C / SIGTERM: running runs are stopped
        and record themselves as `invalid`; the next start picks them up)

Everything the driver decides from is in the results folder, so a campaign killed at any point
and started again does exactly the runs still missing.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkit.campaign.claims import Claims
from toolkit.campaign.config import CampaignFile
from toolkit.campaign.engine import Engine, Finished, Running
from toolkit.campaign.job import Job, make_job
from toolkit.campaign.plan import TO_RUN, KeyPlan, ResultsIndex, RunKey
from toolkit.campaign.spend import Allowance, Spent, allowance
from toolkit.tracks.model import Track

WAIT_S = 0.5  # how often the view refreshes while nothing ends
CLAIM_RETRY_S = 2.0  # how often a key claimed by another campaign is looked at again


@dataclass
class Progress:
    """Where the campaign stands, for the view (and the summary at the end)."""

    total: int
    done: int = 0
    invalid: int = 0  # invalid results (and runs without a result) this session
    gave_up: list[tuple[RunKey, str]] = field(default_factory=list)
    elsewhere: list[RunKey] = field(default_factory=list)  # waiting: another campaign runs it
    queued: int = 0
    running: list[Running] = field(default_factory=list)
    slots: list[str] = field(default_factory=list)
    finished: list[Finished] = field(default_factory=list)  # every run that ended, in order
    budget_s: float = 0.0
    spend: str = ""  # what the campaign spent on model calls, against its caps (if any)


class View:
    """What the driver tells as it goes (the CLI gives a rich or a plain one)."""

    def update(self, progress: Progress) -> None:
        pass

    def event(self, text: str) -> None:
        pass


@dataclass
class Campaign:
    """A loaded campaign: its file, its track, where its results go."""

    file: CampaignFile
    track: Track
    registry: Path | None = None
    """The folder whose tracks.json the track came from."""

    @property
    def results_dir(self) -> Path:
        return self.file.results

    def plan(self) -> list[KeyPlan]:
        return ResultsIndex(self.file, self.track).plan()


def _describe(finished: Finished) -> str:
    where = f" on {finished.slot}" if finished.slot else ""
    if finished.status is None:
        return f"{finished.job.key.label()}: no result{where}: {finished.error}"
    return f"{finished.job.key.label()}: {finished.status}{where}"


class Driver:
    """Runs one campaign on one engine; `run()` returns its progress at the end."""

    def __init__(
        self,
        campaign: Campaign,
        engine: Engine,
        view: View,
        job_settings: dict[str, Any] | None = None,
    ) -> None:
        self.campaign = campaign
        self.engine = engine
        self.view = view
        self.job_settings = job_settings or {}  # what every job carries (local exam, data)
        self.claims = Claims(campaign.results_dir)
        self.errors: dict[RunKey, int] = {}  # runs without any result, per key, this session
        self.index = ResultsIndex(campaign.file, campaign.track)

    def _job(self, plan: KeyPlan) -> Job:
        attempt = plan.invalid_count + self.errors.get(plan.key, 0) + 1
        job = make_job(
            self.campaign.file,
            self.campaign.track,
            plan.key,
            attempt=attempt,
            results_dir=self.campaign.results_dir,
        )
        return job.model_copy(update=self.job_settings)

    def _attempts_left(self, plan: KeyPlan) -> bool:
        used = plan.invalid_count + self.errors.get(plan.key, 0)
        return used < self.campaign.file.attempts

    def _record(self, finished: Finished) -> KeyPlan:
        """The key's state once a run of it ended (its result is in the folder, if any). A run
        that left no result, or a result that does not count for its key (another protocol
        revision, budget or agent than the campaign's: a bug or a stand-in), uses an attempt:
        otherwise the key would be run again forever."""
        plan = self.index.plan_of(finished.job.key)
        stray = finished.status not in (None, "invalid") and plan.state in TO_RUN
        if finished.status is None or stray:
            self.errors[finished.job.key] = self.errors.get(finished.job.key, 0) + 1
        return plan

    def run(self) -> Progress:
        file = self.campaign.file
        plans = self.index.plan()
        self.queue: deque[RunKey] = deque(p.key for p in plans if p.state in TO_RUN)
        self.deferred: dict[RunKey, float] = {}  # claimed elsewhere: look again at that time
        self.announced: set[RunKey] = set()  # keys whose "waiting" line was shown
        self.budgets: dict[RunKey, tuple[int | None, float | None]] = {}  # runs in flight
        self.in_flight: set[RunKey] = set()
        self.progress = progress = Progress(
            total=len(plans),
            done=sum(1 for p in plans if p.state in ("valid", "failed")),
            budget_s=file.budget_s or self.campaign.track.budget_s,
        )
        progress.gave_up = [(p.key, "no attempts left") for p in plans if p.state == "exhausted"]
        try:
            while self.queue or self.in_flight or self.deferred:
                self._undefer()
                while self.engine.room() > 0 and (key := self._next_key()) is not None:
                    self._start(key)
                self._show()
                for finished in self.engine.wait(WAIT_S):
                    self._finish(finished)
                self._show()
        finally:
            self.engine.close()
            self.claims.release_all()
        progress.running = []
        self.view.update(progress)
        return progress

    def _next_key(self) -> RunKey | None:
        """The first queued key whose model is below its `max_concurrent` (taken off the
        queue), or None; a model at its cap leaves its keys queued, in order, for later."""
        caps = {m.name: m.max_concurrent for m in self.campaign.file.models}
        for key in self.queue:
            cap = caps.get(key.model)
            if cap is None or sum(k.model == key.model for k in self.in_flight) < cap:
                self.queue.remove(key)
                return key
        return None

    def _show(self) -> None:
        self.progress.queued = len(self.queue)
        self.progress.elsewhere = sorted(self.deferred, key=RunKey.sort_key)
        self.progress.running = self.engine.running()
        self.progress.slots = self.engine.slots()
        self.view.update(self.progress)

    def _undefer(self) -> None:
        now = time.monotonic()
        for key, when in list(self.deferred.items()):
            if when <= now:
                del self.deferred[key]
                self.queue.append(key)

    def _start(self, key: RunKey) -> None:
        """Claim the key and start it; a key claimed elsewhere waits for that campaign."""
        if key not in self.claims.held() and not self.claims.claim(key):
            if key not in self.announced:  # once per key, not at every look
                self.announced.add(key)
                self.view.event(f"{key.label()}: another campaign is running it; waiting")
            self.deferred[key] = time.monotonic() + CLAIM_RETRY_S
            return
        self.announced.discard(key)
        plan = self.index.plan_of(key)  # the other campaign may have done it meanwhile
        if plan.state not in TO_RUN:
            self.claims.release(key)
            if plan.state == "exhausted":
                self.progress.gave_up.append((key, "no attempts left"))
            else:
                self.progress.done += 1
            return
        job = self._job(plan)
        budget = self._allowance(job)
        if budget.stop is not None:
            self.claims.release(key)
            self.progress.gave_up.append((key, budget.stop))
            self.view.event(f"{key.label()}: not started: {budget.stop}")
            return
        job = job.model_copy(
            update={"max_tokens_total": budget.tokens, "max_cost_usd": budget.cost_usd}
        )
        self.engine.start(job, self.claims.descriptor(key))
        self.in_flight.add(key)
        self.budgets[key] = (budget.tokens, budget.cost_usd)
        self.view.event(f"{key.label()}: started (attempt {job.attempt})")

    def _allowance(self, job: Job) -> Allowance:
        """The run's budget under the campaign's spending caps (toolkit.campaign.spend)."""
        file, track = self.campaign.file, self.campaign.track
        caps = (file.campaign_max_tokens, file.campaign_max_cost_usd)
        per_run = (
            job.max_tokens_total or track.max_tokens_total,
            job.max_cost_usd or track.max_cost_usd,
        )
        if caps == (None, None):
            return Allowance(*per_run)
        spent = Spent.of(r for plan in self.index.plan() for _, r in plan.results)
        self.progress.spend = spent.against(caps)
        in_flight = [self.budgets[k] for k in self.in_flight if k in self.budgets]
        return allowance(caps, spent, in_flight, per_run)

    def _finish(self, finished: Finished) -> None:
        key = finished.job.key
        self.in_flight.discard(key)
        self.progress.finished.append(finished)
        plan = self._record(finished)
        self.view.event(_describe(finished))
        if plan.state in ("valid", "failed"):
            self.progress.done += 1
            self.claims.release(key)
            return
        self.progress.invalid += 1
        if self._attempts_left(plan):
            self.queue.append(key)  # keeps its claim: it runs again soon
            return
        reason = finished.error or f"{plan.invalid_count} invalid results"
        self.progress.gave_up.append((key, reason))
        self.claims.release(key)
        self.view.event(f"{key.label()}: giving up after {self.campaign.file.attempts} tries")
