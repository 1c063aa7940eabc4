"""Before a campaign starts: each model's provider asked once, so that a bad key or a provider
that is down is found in seconds, not as a row of `invalid` runs an hour later.

Only models with runs still to do are checked (a campaign that is done asks nobody). A model
is checked as its runs would be: its adapter built from its entry (provider, base URL, key
variable) and asked for its `preflight()` (opencode: one tiny call of the harness's own). A
model whose adapter cannot be built (no key in the environment, say) fails too, and so does one
whose provider cannot be priced when the file sets a cost cap (the cap would not hold).
"""

from __future__ import annotations

from dataclasses import dataclass

from toolkit.agents.providers import cost_cap_check
from toolkit.campaign.config import CampaignError
from toolkit.campaign.driver import Campaign
from toolkit.campaign.job import build_agent, make_job
from toolkit.campaign.plan import TO_RUN, KeyPlan


@dataclass(frozen=True)
class ModelProblem:
    """A model whose provider failed the pre-flight check, and its runs still to do."""

    model: str
    problem: str
    runs: int

    def line(self) -> str:
        return f"model '{self.model}': {self.problem}"


def check_models(campaign: Campaign, plans: list[KeyPlan]) -> list[ModelProblem]:
    """The models (with runs to do) whose provider fails its pre-flight check, in file order."""
    to_run = [p.key for p in plans if p.state in TO_RUN]
    problems: list[ModelProblem] = []
    for entry in campaign.file.models:
        keys = [k for k in to_run if k.model == entry.name]
        if not keys:
            continue
        job = make_job(
            campaign.file, campaign.track, keys[0], attempt=1, results_dir=campaign.results_dir
        )
        try:
            agent = build_agent(job)
            # A cost cap the file sets that the relay cannot price: refused, not ignored.
            problem = cost_cap_check(
                getattr(agent, "provider_entry", None),
                campaign.file.max_cost_usd or campaign.file.campaign_max_cost_usd,
                "max_cost_usd" if campaign.file.max_cost_usd else "campaign_max_cost_usd",
            )
            problem = problem or agent.preflight()
        except CampaignError as exc:
            problem = str(exc).removeprefix(f"model '{entry.name}': ")
        if problem is not None:
            problems.append(ModelProblem(entry.name, " ".join(problem.split()), len(keys)))
    return problems


def without(campaign: Campaign, models: set[str]) -> Campaign:
    """The campaign with these models left out (their runs are neither planned nor run)."""
    kept = [m for m in campaign.file.models if m.name not in models]
    if not kept:
        raise CampaignError("every model of the campaign failed the provider pre-flight check")
    file = campaign.file.model_copy(update={"models": kept})
    return Campaign(file=file, track=campaign.track, registry=campaign.registry)
