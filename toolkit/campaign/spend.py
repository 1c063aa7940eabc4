"""A campaign's spending caps: tokens and dollars for all its runs together.

`campaign_max_tokens` / `campaign_max_cost_usd` in campaign.toml bound what the whole campaign
may spend on model calls. Before a run starts, the driver adds up what the campaign's results
in the folder spent (`Usage` of every result of its keys, invalid runs included: their calls
were paid for) and reserves, for each run in flight, the most that run may spend (its own
per-run budget). The new run's own budget is then at most what is left; when nothing is left,
the campaign starts no more runs and says why. The relay enforces each run's budget, so the
campaign's total can pass its cap by at most one model call per run.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from toolkit.results.model import RunResult, Usage


def tokens_of(usage: Usage) -> int:
    parts = (
        usage.input_tokens,
        usage.output_tokens,
        usage.reasoning_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
    )
    return sum(p or 0 for p in parts)


@dataclass(frozen=True)
class Spent:
    tokens: int
    cost_usd: float

    def against(self, caps: tuple[int | None, float | None]) -> str:
        """ "spent 1,234 of 10,000 tokens · $0.50 of $100.00", for the campaign's view."""
        token_cap, cost_cap = caps
        parts = [f"spent {self.tokens:,}" + (f" of {token_cap:,}" if token_cap else "") + " tokens"]
        if cost_cap is not None or self.cost_usd:
            parts.append(f"${self.cost_usd:,.2f}" + (f" of ${cost_cap:,.2f}" if cost_cap else ""))
        return " · ".join(parts)

    @classmethod
    def of(cls, results: Iterable[RunResult]) -> Spent:
        runs = list(results)
        return cls(
            tokens=sum(tokens_of(r.usage) for r in runs),
            cost_usd=sum(r.usage.cost_usd or 0.0 for r in runs),
        )


@dataclass(frozen=True)
class Allowance:
    """What a new run may spend; `stop` says why none can start."""

    tokens: int | None
    cost_usd: float | None
    stop: str | None = None


def allowance(
    caps: tuple[int | None, float | None],
    spent: Spent,
    in_flight: list[tuple[int | None, float | None]],
    per_run: tuple[int | None, float | None],
) -> Allowance:
    """The budget of the next run under the campaign's caps (`caps`: tokens, dollars; None =
    no cap), given what was spent and the per-run budgets of the runs in flight."""
    token_cap, cost_cap = caps
    run_tokens, run_cost = per_run
    tokens = run_tokens
    if token_cap is not None:
        reserved = sum(t if t is not None else token_cap for t, _ in in_flight)
        left = token_cap - spent.tokens - reserved
        if left <= 0:
            return Allowance(None, None, f"the campaign's token budget ({token_cap:,}) is spent")
        tokens = left if run_tokens is None else min(run_tokens, left)
    cost = run_cost
    if cost_cap is not None:
        reserved_usd = sum(c if c is not None else cost_cap for _, c in in_flight)
        left_usd = cost_cap - spent.cost_usd - reserved_usd
        if left_usd <= 0:
            return Allowance(None, None, f"the campaign's cost budget (${cost_cap:,.2f}) is spent")
        cost = left_usd if run_cost is None else min(run_cost, left_usd)
    return Allowance(tokens, cost)
