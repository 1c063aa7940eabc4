"""One run of a campaign as data: what a run process needs to make its `RunSpec`, and its report.

The driver writes a `Job` (JSON) for every run it starts; the run process
(`python -m toolkit.campaign.child`) turns it into a `RunSpec` on the machine where the run
happens (its own exam copy, public set and training data) and answers with a `Report`.
"""

from __future__ import annotations

import inspect
import os
import socket
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from toolkit.agents import AGENTS, Agent
from toolkit.agents.relay.budget import limits_for
from toolkit.campaign.config import CampaignError, CampaignFile, ModelEntry
from toolkit.campaign.plan import RunKey
from toolkit.results.model import RunStatus
from toolkit.run.spec import env_secrets, scaled_budget
from toolkit.text.data import load_prepared
from toolkit.tracks.model import Track

# Environment variables whose values must never reach an agent's workspace (as `toolkit run`).


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Job(_Model):
    """One run to make: its key, how, and where its result goes."""

    track: Track
    model: str
    effort: str | None
    seed: int
    agent: str
    provider: str | None = None
    base_url: str | None = None
    key_env: str | None = None
    backend: str
    exam: str | None = None  # exam.jsonl on this machine; None: the run process gets a copy
    train_data: str | None = None  # raw training text (None: the built-in corpus)
    data_dir: str | None = None  # already prepared data (the local engine prepares it once)
    budget_s: float | None = None  # None: the track's
    per_call_limit_s: float | None = None
    reserved_s: float | None = None
    results_dir: str
    run_id: str | None = None
    gpu: str | None = None
    cpus: float | None = None  # the run's CPU quota, in cores
    max_tokens_total: int | None = None  # None: the track's token budget
    max_cost_usd: float | None = None  # None: the track's cost budget
    node: str | None = None
    attempt: int = 1

    @property
    def key(self) -> RunKey:
        return RunKey(self.track.id, self.model, self.effort, self.seed)


class Report(_Model):
    """What the run process says when it is done (or could not run)."""

    run_id: str | None = None
    status: RunStatus | None = None  # None: no result was written
    result: str | None = None  # path of the result file
    error: str | None = None  # why there is no result
    started: float  # wall-clock seconds (time.time()) when the run process began
    finished: float
    node: str | None = None
    gpu: str | None = None


def make_job(
    campaign: CampaignFile, track: Track, key: RunKey, *, attempt: int, results_dir: Path
) -> Job:
    entry: ModelEntry = next(m for m in campaign.models if m.name == key.model)
    budget, per_call, reserved = scaled_budget(track, campaign.budget_s)
    return Job(
        track=track,
        model=key.model,
        effort=key.effort,
        seed=key.seed,
        agent=campaign.agent,
        provider=entry.provider,
        base_url=entry.base_url,
        key_env=entry.key_env,
        backend=campaign.backend,
        train_data=None if campaign.train_data is None else str(campaign.train_data),
        budget_s=budget,
        per_call_limit_s=per_call,
        reserved_s=reserved,
        results_dir=str(results_dir),
        cpus=campaign.cpus_per_run,
        max_tokens_total=campaign.max_tokens_total,
        max_cost_usd=campaign.max_cost_usd,
        attempt=attempt,
    )


def build_agent(job: Job) -> Agent:
    """The job's agent adapter, given the model entry's provider settings it accepts.

    An adapter takes them as keyword arguments of its `for_run` (`provider`, `base_url`,
    `key_env`); a setting the adapter does not take is a campaign error, never ignored, and so
    is an adapter that cannot be set up (no key, scaffold missing: its one line).
    """
    cls = AGENTS[job.agent]
    settings = {
        name: value
        for name, value in (
            ("provider", job.provider),
            ("base_url", job.base_url),
            ("key_env", job.key_env),
        )
        if value is not None
    }
    # Adapters are built for a run by `for_run` (what `toolkit run` does), which checks the
    # scaffold, the provider and its key; its named parameters are the settings it takes.
    accepted = inspect.signature(cls.for_run).parameters
    unknown = [
        name
        for name in settings
        if name not in accepted or accepted[name].kind is inspect.Parameter.VAR_KEYWORD
    ]
    if unknown:
        raise CampaignError(
            f"agent '{job.agent}' takes no {', '.join(unknown)} setting (model '{job.model}')"
        )
    try:
        limits = limits_for(job.track, job.max_tokens_total, job.max_cost_usd)
        return cls.for_run(model=job.model, effort=job.effort, limits=limits, **settings)
    except (RuntimeError, ValueError) as exc:
        raise CampaignError(f"model '{job.model}': {exc}") from exc


def secret_values(job: Job) -> list[str]:
    """Values that must never reach the agent's workspace: keys in the environment."""
    found = env_secrets()
    if job.key_env and os.environ.get(job.key_env):
        found.append(os.environ[job.key_env])
    return found


def check_training_data(track: Track, data_dir: Path, source: str | None) -> None:
    """Refuse prepared data that is not what the track pins (as `toolkit run` does)."""
    data = load_prepared(data_dir)
    mismatch = track.train_data_mismatch(data.train_sha256, data.val_sha256)
    if mismatch:
        raise CampaignError(
            f"{source or 'the default corpus'}: not the training data of track '{track.id}' "
            f"({mismatch}); set train_data in the campaign file to the track's training text"
        )


def host_name() -> str:
    return socket.gethostname()
