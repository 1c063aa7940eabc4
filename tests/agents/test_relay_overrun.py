"""Red-team: a provider that bills more input than a body's bytes / 4 cannot make the relay run
a budget past its limit by more than one call's output cap, one call at a time or many at once.

The fake provider bills each call's input at one token per byte of the body it got plus 600
tokens the body does not show (a cached context, tool definitions it expands, a hidden system
prompt), 300 of them as cache reads, and writes every output token the call may ask for. The
relay reserved `body_bytes // 4` tokens of input before (issue 27: 24 calls past a 5,000-token
budget); it now reserves one token per byte plus the largest overhead the provider billed, and
weighs a call's input against what is left before passing it on (`relay_budget.py`).
"""

from __future__ import annotations

import threading

import pytest

from tests.agents.fake_provider import FakeProvider, Reply, Request
from tests.agents.relay_calls import RelayFactory, body_for, send
from toolkit.agents.relay.budget import RelayLimits

BUDGET = 5000
CAP = 300  # the most output one call may ask for (the track's max_output_tokens)
HIDDEN = 600  # input tokens the provider bills that are not in the body
USD_PER_TOKEN = 1e-6  # the cost the provider reports (the relay has no prices here)


def _greedy(request: Request) -> Reply:
    """Bills far more input than bytes / 4, and every output token the call was allowed."""
    cap = request.body.get("max_tokens") or request.body.get("max_completion_tokens") or CAP
    assert isinstance(cap, int)
    prompt = len(request.raw) + HIDDEN
    return Reply(
        text="hi",
        prompt_tokens=prompt,
        cached_tokens=300,
        completion_tokens=cap,
        delay_s=0.2,
        cost=(prompt + cap) * USD_PER_TOKEN,  # reported with the usage, as OpenRouter does
    )


def _billed(provider: FakeProvider) -> int:
    return provider.reported["prompt"] + provider.reported["completion"]


def _call(relay: object, n: int) -> int:
    body = body_for("chat", messages=[{"role": "user", "content": "x" * (40 + 37 * (n % 9))}])
    return send(relay, "openai-compatible", body)[0]  # type: ignore[arg-type]


@pytest.mark.parametrize("budget", ["tokens", "cost"])
@pytest.mark.parametrize("at_once", [1, 8])
def test_a_provider_billing_more_than_bytes_over_4_overruns_by_one_output_cap_at_most(
    relays: RelayFactory, at_once: int, budget: str
) -> None:
    if budget == "tokens":
        limits = RelayLimits(max_output_tokens=CAP, max_tokens_total=BUDGET)
    else:  # the same budget in dollars, kept with the costs the provider reports
        limits = RelayLimits(max_output_tokens=CAP, max_cost_usd=BUDGET * USD_PER_TOKEN)
    with FakeProvider(_greedy) as p:
        relay = relays(p, limits=limits)
        statuses: list[int] = []
        lock = threading.Lock()

        def worker(k: int) -> None:
            for n in range(12):  # far more calls than the budget covers
                status = _call(relay, k * 12 + n)
                with lock:
                    statuses.append(status)
                if status != 200:
                    return

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(at_once)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        # Each call is counted before its client has the whole answer: nothing to wait for.
        assert relay.spend.in_flight == 0
        counted, cost = relay.spend.tokens, relay.spend.cost_usd
        relay.close()
    billed = _billed(p)
    assert statuses.count(200) == len(p.requests) >= 2  # it did spend, then stopped
    assert 400 in statuses  # ... with the budget error
    assert counted == billed  # the relay counted what the provider billed
    assert billed <= BUDGET + CAP, f"{billed} tokens billed against a {BUDGET}-token budget"
    assert cost is not None and cost <= (BUDGET + CAP) * USD_PER_TOKEN + 1e-9, cost
