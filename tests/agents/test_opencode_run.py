"""Whole runs with the real opencode binary, driven by a scripted model provider.

The provider is a fake (tests/agents/fake_provider.py) but everything else is real: the
scaffold, its configuration, the controller sandbox with its egress allow-list, the runner, the
clock, grading. Each test is one run on the demo track with a short budget.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.agents.conftest import KEY, AgentFactory, SpecFactory
from tests.agents.fake_provider import FakeProvider, Reply, Request, bash, named_host, steps
from toolkit.results import load_run
from toolkit.run.orchestrate import execute_run

pytestmark = pytest.mark.slow

TRIVIAL_BUNDLE = """class Model:
    def generate(self, prompts, lengths):
        return [b" " * n for n in lengths]


def load(bundle_dir, device):
    return Model()
"""


def _promote_submitted(request: Request) -> Reply:
    """Promote the candidate the last `runner submit` printed (the model reads its output)."""
    found = re.search(r"candidate (c\d+)", request.last_result())
    assert found, f"no candidate in the submit output: {request.last_result()[:500]}"
    return Reply(calls=[bash(f"runner promote {found.group(1)}")])


USAGE = {"prompt_tokens": 1200, "completion_tokens": 60, "cached_tokens": 300}


def _with_usage(n: int, reply: Reply) -> Reply:
    reply.prompt_tokens = 1200 + 10 * n
    reply.completion_tokens = 60 + n
    reply.cached_tokens = 300
    reply.reasoning_tokens = 9
    return reply


class _Listener(ThreadingHTTPServer):
    """A second server on the host's loopback: nothing in the run may reach it."""

    daemon_threads = True

    def __init__(self) -> None:
        self.connections = 0
        super().__init__(("127.0.0.1", 0), BaseHTTPRequestHandler)

    def get_request(self):  # type: ignore[no-untyped-def]
        self.connections += 1
        return super().get_request()


@pytest.fixture
def listener() -> object:
    server = _Listener()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def test_a_scripted_model_trains_submits_promotes_and_is_graded(
    make_agent: AgentFactory, make_spec: SpecFactory, listener: _Listener, tmp_path: Path
) -> None:
    script = [
        Reply(calls=[("read", {"filePath": "TASK.md"})]),
        Reply(calls=[bash("runner time_left")]),
        Reply(
            calls=[bash("runner python starter/train.py --data data --out bundles/b1 --budget-s 5")]
        ),
        Reply(calls=[bash("runner submit bundles/b1")]),
        _promote_submitted,
        Reply(text="Promoted; done."),
    ]

    def model(request: Request) -> Reply:
        step = script[min(request.turn, len(script) - 1)]
        return _with_usage(request.turn, step(request) if callable(step) else step)

    name, address = named_host()
    with FakeProvider(model, host=name, address=address) as provider:
        agent = make_agent(provider, effort="high")
        spec = make_spec(agent, budget=150, per_call=60, reserved=10)
        result = execute_run(spec)
    assert result.status == "valid", result.status_reason
    assert result.promoted is not None and result.promoted.id == "c001"
    assert result.score.total > 0 and result.bits_per_byte is not None
    # Who and how: the row's identity and the scaffold's pinned configuration.
    assert (result.agent, result.model, result.effort, result.provider) == (
        "opencode",
        "fake-model",
        "high",
        "fake",
    )
    assert result.agent_version == result.config.scaffold_version == agent.version
    assert result.config.scaffold_config_sha256 == agent.config_sha256()
    assert {"controller:egress-allowlist", "controller:provider-only"} <= set(
        result.config.isolation
    )
    # Every model call carried the effort, the key, and the tools the protocol allows.
    calls = provider.agent_requests()
    assert len(calls) == len(script)
    assert all(r.body.get("reasoning_effort") == "high" for r in provider.requests)
    assert all(r.headers.get("Authorization") == f"Bearer {KEY}" for r in provider.requests)
    tools = {t["function"]["name"] for t in calls[0].body["tools"]}  # type: ignore[index,union-attr]
    assert tools == {"bash", "read", "edit", "write", "glob", "grep"}
    # What the model did went through the runner (audit) and came back to it.
    results = calls[-1].tool_results()
    assert any("Your task" in text for text in results.values())  # it read TASK.md
    assert any("left" in text for text in results.values())  # runner time_left
    # Usage: summed over the steps, equal to what the provider reported.
    reported = provider.reported
    usage = result.usage
    assert usage.input_tokens == reported["prompt"] - reported["cached"]
    assert usage.cache_read_tokens == reported["cached"]
    assert usage.output_tokens == reported["completion"] - reported["reasoning"]
    assert usage.reasoning_tokens == reported["reasoning"]
    # Artifacts: events, the exported transcript, the scaffold's log, the egress log.
    folder = spec.results_dir / "demo-cpu"
    saved = load_run(folder / f"{result.run_id}.json")
    assert saved == result
    for key in ("events", "transcript", "scaffold", "egress", "audit", "history"):
        assert (folder / result.artifacts[key]).is_file(), key
    events = [json.loads(line) for line in (folder / result.artifacts["events"]).open()]
    assert sum(e["type"] == "step_finish" for e in events) == len(script)
    transcript = json.loads((folder / result.artifacts["transcript"]).read_text())
    assert transcript["info"]["id"] == events[0]["sessionID"]
    assert len([m for m in transcript["messages"] if m["info"]["role"] == "assistant"]) == len(
        script
    )
    # The scaffold opened no connection but to the provider; the other listener saw nothing.
    egress = [json.loads(line) for line in (folder / result.artifacts["egress"]).open()]
    assert egress and all(e["allowed"] and e["error"] is None for e in egress), egress
    assert {(e["host"], e["port"]) for e in egress} == {(name, provider.port)}
    assert listener.connections == 0
    # The key is in no published file.
    for path in (folder / result.run_id).rglob("*"):
        if path.is_file() and "candidates" not in path.parts:
            assert KEY not in path.read_text(errors="replace"), path


def test_a_provider_that_fails_makes_the_run_invalid(
    make_agent: AgentFactory, make_spec: SpecFactory
) -> None:
    with FakeProvider(steps(Reply(status=500))) as provider:
        agent = make_agent(provider, stall_share=0.05)
        result = execute_run(make_spec(agent, budget=120, per_call=60, reserved=10))
    assert result.status == "invalid"
    assert result.status_reason and "provider" in result.status_reason
    assert "infrastructure" in result.status_reason
    assert len(provider.requests) >= 2  # the scaffold retried before the harness gave up
    assert result.timings.used_s < 60


def test_fetching_a_url_or_running_python_in_the_controller_fails_and_the_run_goes_on(
    make_agent: AgentFactory, make_spec: SpecFactory, listener: _Listener
) -> None:
    other = f"http://127.0.0.1:{listener.server_address[1]}/"
    attempts = [
        Reply(calls=[("webfetch", {"url": other, "format": "text"})]),
        Reply(calls=[bash(f"curl -sS -m 5 {other}; echo curl=$?")]),
        Reply(calls=[bash("curl -sS -m 5 https://example.com/; echo curl=$?")]),
        Reply(calls=[bash("python3 -c 'print(6*7)'; echo python=$?")]),
        Reply(calls=[("write", {"filePath": "bundles/t/inference.py", "content": TRIVIAL_BUNDLE})]),
        Reply(calls=[bash("runner submit bundles/t")]),
        _promote_submitted,
        Reply(text="done"),
    ]
    with FakeProvider(steps(*attempts)) as provider:
        agent = make_agent(provider, effort=None)
        spec = make_spec(agent, budget=120, per_call=60, reserved=10)
        result = execute_run(spec)
    assert result.status == "valid", result.status_reason
    assert result.promoted is not None
    results = list(provider.agent_requests()[-1].tool_results().values())
    assert len(results) == len(attempts) - 1
    assert "unavailable tool" in results[0] or "denied" in results[0].lower()
    assert "curl=7" in results[1] and "curl=6" in results[2]
    assert "python=127" in results[3] and "42" not in results[3]
    assert listener.connections == 0
    assert all("reasoning_effort" not in r.body for r in provider.requests)
    folder = spec.results_dir / "demo-cpu"
    egress = [json.loads(line) for line in (folder / result.artifacts["egress"]).open()]
    refused = {(e["host"], e["port"]) for e in egress if not e["allowed"]}
    assert ("127.0.0.1", listener.server_address[1]) in refused
    assert ("example.com", None) in refused
    assert {(e["host"], e["port"]) for e in egress if e["allowed"]} == {
        ("127.0.0.1", provider.port)
    }
