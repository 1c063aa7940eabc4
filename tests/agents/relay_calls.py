"""Calls to a real relay in front of the scripted provider, per API, for the relay's tests."""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.agents.fake_provider import FakeProvider
from toolkit.agents.opencode import OpencodeAgent
from toolkit.agents.provider_api import CREDENTIALS
from toolkit.agents.providers import Provider
from toolkit.agents.relay.budget import RelayLimits
from toolkit.agents.relay.front import ProviderRelay
from toolkit.results.model import Usage

KEY = "sk-ari-policy-test-77aa"
MODEL = "fake-model"
CAP = 4096
ENDPOINT = {
    "openai-compatible": "/v1/chat/completions",
    "openai": "/v1/chat/completions",
    "openai-responses": "/v1/responses",
    "anthropic": "/v1/messages",
    "google": f"/v1/models/{MODEL}:streamGenerateContent?alt=sse",
}
# What a relayed call's headers may hold: the relay's own, and the few a caller may choose.
RELAY_HEADERS = {"host", "content-type", "content-length", "accept-encoding", "user-agent"}
CALLER_HEADERS = {"accept", "anthropic-version", "anthropic-beta"}

RelayFactory = Callable[..., ProviderRelay]


@contextmanager
def relay_factory(tmp_path: Path) -> Iterator[RelayFactory]:
    """Makes relays (closed at the end) for a scripted provider, of any kind; the API's
    endpoint is `ENDPOINT[api]`, its log `tmp_path / provider.jsonl`."""
    made: list[ProviderRelay] = []

    def make(
        provider: FakeProvider, kind: str = "openai-compatible", **kw: object
    ) -> ProviderRelay:
        kind = "openai" if kind == "openai-responses" else kind
        options: dict[str, object] = {"stall_limit_s": 30.0, "probe_wait_max_s": 2.0}
        options["limits"] = RelayLimits(max_output_tokens=CAP)
        options.update(kw)
        relay = ProviderRelay(
            kind=kind,
            base_url=provider.base_url,
            model=MODEL,
            key=KEY,
            credential=CREDENTIALS[kind],
            log_path=tmp_path / "provider.jsonl",
            **options,  # type: ignore[arg-type]
        ).start()
        made.append(relay)
        return relay

    yield make
    for relay in made:
        relay.close()


def body_for(api: str, **extra: object) -> dict[str, object]:
    """A call as the scaffold's client would send it, for each API."""
    text = "the secret plan"
    body: dict[str, object]
    if api == "google":
        body = {"contents": [{"role": "user", "parts": [{"text": text}]}]}
    elif api == "openai-responses":
        body = {"model": MODEL, "input": text, "stream": True}
    else:
        body = {"model": MODEL, "messages": [{"role": "user", "content": text}], "stream": True}
    body.update(extra)
    return body


def send(
    relay: ProviderRelay,
    api: str,
    body: dict[str, object] | bytes,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, object]]:
    conn = http.client.HTTPConnection("127.0.0.1", relay.port, timeout=60)
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    conn.request("POST", ENDPOINT[api], body=data, headers=headers or {})
    answer = conn.getresponse()
    got = answer.read()
    conn.close()
    try:
        parsed = json.loads(got)
    except ValueError:
        parsed = {"raw": got.decode(errors="replace")}
    return answer.status, parsed if isinstance(parsed, dict) else {"raw": parsed}


def message(answer: dict[str, object]) -> str:
    error = answer.get("error")
    return str(error.get("message")) if isinstance(error, dict) else ""


def log_entries(tmp_path: Path, kind: str) -> list[dict[str, object]]:
    lines = (tmp_path / "provider.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["kind"] == kind]


def fake_provider_entry(url: str = "http://x/v1", cost: dict[str, float] | None = None) -> Provider:
    """The providers-file entry of a fake openai-compatible provider at `url`."""
    return Provider(
        name="fake", kind="openai-compatible", base_url=url, key_env="K", cost=cost or {}
    )


def recorded_usage(relay: ProviderRelay, entry: Provider | None = None) -> Usage:
    """What the opencode adapter records in the result for this relay's run (the run's teardown
    closes the relay first, as here)."""
    relay.close()
    agent = OpencodeAgent(
        entry or fake_provider_entry(),
        model=MODEL,
        effort=None,
        api_key=KEY,
        binary=Path("/nonexistent/opencode"),
        version="test",
        ripgrep=Path("/nonexistent/rg"),
        limits=relay.limits,
    )
    agent.relay = relay
    return agent.usage()
