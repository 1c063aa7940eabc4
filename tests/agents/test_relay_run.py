"""A whole run with the real opencode binary whose model keeps calling past the run's token
budget: the relay refuses the call that comes after the budget is spent, the scaffold shows the
relay's error and stops, and the run is graded as usual (valid: a spent budget is no provider
failure). The result and agent.log record the spend.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.agents.conftest import AgentFactory, SpecFactory
from tests.agents.fake_provider import FakeProvider, Reply, Request, bash
from toolkit.agents.relay.budget import RelayLimits
from toolkit.run.orchestrate import execute_run

pytestmark = pytest.mark.slow

BUNDLE = """class Model:
    def generate(self, prompts, lengths):
        return [b" " * n for n in lengths]


def load(bundle_dir, device):
    return Model()
"""


def _model(request: Request) -> Reply:
    """Write a bundle, submit it, promote it, then keep working (calling) forever."""
    if not request.body.get("tools"):
        return Reply(text="ARI Bench run")  # the scaffold's title call
    turn = request.turn
    if turn == 0:
        return Reply(calls=[("write", {"filePath": "bundles/t/inference.py", "content": BUNDLE})])
    if turn == 1:
        return Reply(calls=[bash("runner submit bundles/t")])
    if turn == 2:
        found = re.search(r"candidate (c\d+)", request.last_result())
        assert found, request.last_result()[:300]
        return Reply(calls=[bash(f"runner promote {found.group(1)}")])
    return Reply(calls=[bash(f"echo still working {turn}")])


def test_a_model_that_keeps_calling_past_its_budget_is_stopped_and_graded(
    make_agent: AgentFactory, make_spec: SpecFactory
) -> None:
    # Each call bills 1,040 tokens; the relay reserves one token per byte of a call's body
    # (opencode's are 22-26 KB) before passing it on: room for a few calls, then refusals.
    limits = RelayLimits(max_output_tokens=500, max_tokens_total=8 * 1040 + 30_000)
    with FakeProvider(_model) as provider:
        agent = make_agent(provider, limits=limits)
        spec = make_spec(agent, budget=150, per_call=60, reserved=10)
        result = execute_run(spec)
    assert result.status == "valid", result.status_reason
    assert result.promoted is not None
    usage = result.usage
    assert usage.budget_spent is True and usage.budget_refused_calls
    assert usage.max_tokens_total == limits.max_tokens_total
    # What was billed stays within the budget plus one call's output cap.
    billed = provider.reported["prompt"] + provider.reported["completion"]
    assert billed <= limits.max_tokens_total + 500
    # The provider saw every call the relay passed on and none it refused; each was capped.
    assert usage.model_calls == len(provider.requests) >= 4  # title, write, submit, promote
    assert all(r.body["max_tokens"] == 500 for r in provider.requests)
    folder = spec.results_dir / "demo-cpu-3"
    relayed = [json.loads(line) for line in (folder / result.artifacts["provider"]).open()]
    refused = [e for e in relayed if e["kind"] == "refused"]
    assert refused and all(e["status"] == 400 for e in refused)
    assert not [e for e in relayed if e["kind"] == "probe"]
    # The scaffold showed the relay's error (to the model, and in its events).
    events = (folder / result.artifacts["events"]).read_text()
    assert "the run's token budget is spent" in events
    log = (folder / result.artifacts["agent_log"]).read_text()
    assert "token budget is spent" in log and "the run stays valid" in log
