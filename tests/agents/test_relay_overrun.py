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
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agents.fake_provider import FakeProvider, Reply, Request
from tests.agents.relay_calls import RelayFactory, body_for, relay_factory, send
from toolkit.agents.relay_budget import RelayLimits

BUDGET = 5000
CAP = 300  # the most output one call may ask for (the track's max_output_tokens)
HIDDEN = 600  # input tokens the provider bills that are not in the body


def _greedy(request: Request) -> Reply:
    """Bills far more input than bytes / 4, and every output token the call was allowed."""
    cap = request.body.get("max_tokens") or request.body.get("max_completion_tokens") or CAP
    assert isinstance(cap, int)
    return Reply(
        text="hi",
        prompt_tokens=len(request.raw) + HIDDEN,
        cached_tokens=300,
        completion_tokens=cap,
        delay_s=0.2,
    )


@pytest.fixture
def relays(tmp_path: Path) -> Iterator[RelayFactory]:
    with relay_factory(tmp_path) as make:
        yield make


def _billed(provider: FakeProvider) -> int:
    return provider.reported["prompt"] + provider.reported["completion"]


def _call(relay: object, n: int) -> int:
    body = body_for("chat", messages=[{"role": "user", "content": "x" * (40 + 37 * (n % 9))}])
    return send(relay, "openai-compatible", body)[0]  # type: ignore[arg-type]


@pytest.mark.parametrize("at_once", [1, 8])
def test_a_provider_billing_more_than_bytes_over_4_overruns_by_one_output_cap_at_most(
    relays: RelayFactory, at_once: int
) -> None:
    limits = RelayLimits(max_output_tokens=CAP, max_tokens_total=BUDGET)
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
        counted = relay.spend.tokens
        relay.close()
    billed = _billed(p)
    assert statuses.count(200) == len(p.requests) >= 2  # it did spend, then stopped
    assert 400 in statuses  # ... with the budget error
    assert counted == billed  # the relay counted what the provider billed
    assert billed <= BUDGET + CAP, f"{billed} tokens billed against a {BUDGET}-token budget"
