"""The opencode agent on the docker backend: the provider relay on the host, reached through the
controller's egress forwarder, with the key in the harness only.

A real engine, the real opencode binary in the controller image, a scripted provider on the
host's loopback (only the relay, a host process, can reach it).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agents.conftest import opencode_binary
from tests.agents.fake_provider import FakeProvider, Reply, Request, bash, steps
from tests.docker.conftest import SpecFactory
from toolkit.agents.opencode import OpencodeAgent
from toolkit.agents.relay.endpoint import RELAY_HOST
from toolkit.run.orchestrate import execute_run
from toolkit.sandbox.docker import engine as docker_engine
from toolkit.sandbox.docker.egress import UPSTREAM_ENV

__all__ = ["opencode_binary"]
KEY = "sk-ari-docker-" + "7c41e09b2d5a"
BUNDLE = """class Model:
    def generate(self, prompts, lengths):
        return [b" " * n for n in lengths]


def load(bundle_dir, device):
    return Model()
"""
# Every process environment and command line of the controller, and its files, for the key
# (joined at run time: the command line itself never holds it).
SEARCH = (
    f'K={KEY[:14]}; K="${{K}}{KEY[14:]}"; n=0; '
    "for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do "
    's="$(tr "\\0" "\\n" < "$f" 2>/dev/null)"; n=$((n+1)); '
    '[[ "$s" == *"$K"* ]] && echo "FOUND-IN $f"; done; '
    'grep -rlsF -f <(printf "%s\\n" "$K") "$PWD" "$HOME" "$XDG_CONFIG_HOME" "$XDG_DATA_HOME" '
    "/tmp /var/tmp /etc | sed 's/^/FOUND-IN /'; echo \"search-done proc-files=$n\""
)


@pytest.fixture
def relay_network(client: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An upstream network with a host address (its gateway), as the default one has, but
    internal: the forwarder reaches the host's relay and nothing beyond."""
    name = f"ari-test-relay-{secrets.token_hex(3)}"
    client.api.create_network(name, driver="bridge", internal=True, labels=docker_engine.labels())
    monkeypatch.setenv(UPSTREAM_ENV, name)
    yield name
    client.api.remove_network(name)


def test_opencode_on_docker_reaches_its_provider_through_the_relay_only(
    opencode_binary: tuple[Path, str],
    relay_network: str,
    make_spec: SpecFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def promote(request: Request) -> Reply:
        found = request.last_result().split("candidate ", 1)[1].split(":", 1)[0]
        return Reply(calls=[bash(f"runner promote {found}")])

    script = steps(
        Reply(calls=[bash(SEARCH)]),
        Reply(calls=[("write", {"filePath": "bundles/t/inference.py", "content": BUNDLE})]),
        Reply(calls=[bash("runner submit bundles/t")]),
        promote,
        Reply(text="done"),
    )
    with FakeProvider(script) as provider:
        providers = tmp_path / "providers.toml"
        providers.write_text(
            f'[fake]\nkind = "openai-compatible"\nbase_url = "{provider.base_url}"\n'
            'key_env = "FAKE_PROVIDER_KEY"\n'
        )
        monkeypatch.setenv("FAKE_PROVIDER_KEY", KEY)
        agent = OpencodeAgent.for_run(
            provider="fake", model="fake-model", effort="high", providers_path=providers
        )
        spec = make_spec(agent, budget=150, per_call=60, reserved=10)
        spec.model, spec.effort, spec.secrets = agent.model, agent.effort, [KEY]
        result = execute_run(spec)
    assert result.status == "valid", result.status_reason
    assert result.config.backend == "docker"
    assert {"controller:provider-relay", "controller:provider-only"} <= set(result.config.isolation)
    # The key reached the provider from the relay, and is nowhere in the controller.
    assert all(r.headers.get("Authorization") == f"Bearer {KEY}" for r in provider.requests)
    assert all(r.body.get("reasoning_effort") == "high" for r in provider.requests)
    search = next(iter(provider.agent_requests()[1].tool_results().values()))
    assert "search-done" in search and "FOUND-IN" not in search, search
    # The controller's one destination: the relay, by its name, through the forwarder.
    folder = spec.results_dir / "demo-cpu-3"
    egress = [json.loads(line) for line in (folder / result.artifacts["egress"]).open()]
    assert egress and {(e["host"], e["port"]) for e in egress} == {(RELAY_HOST, agent.relay.port)}  # type: ignore[union-attr]
    relayed = [json.loads(line) for line in (folder / result.artifacts["provider"]).open()]
    calls = [e for e in relayed if e["kind"] == "call"]
    assert len(calls) == len(provider.requests) and all(e["status"] == 200 for e in calls)
    assert result.usage.source == "provider" and result.usage.model_calls == len(calls)
    for path in (folder / result.run_id).rglob("*"):
        if path.is_file() and "candidates" not in path.parts:
            assert KEY not in path.read_text(errors="replace"), path
