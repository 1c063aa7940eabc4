"""The provider relay on its own: what it passes, what it refuses, and how it decides that the
provider failed. A real relay, a scripted provider on the host's loopback, and plain HTTP
clients in the role of the controller (the scaffold, or the model's own commands).
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.agents.fake_provider import TLS_DIR, FakeProvider, Reply, Request
from tests.waiting import wait_for
from toolkit.agents.provider_api import PROBE_TEXT, Credential
from toolkit.agents.providers import load_providers
from toolkit.agents.relay.front import ProviderRelay
from toolkit.agents.relay.retry import RetryPolicy

KEY = "sk-ari-relay-test-5f1d2c3b4a"
MODEL = "fake-model"


def _relay(provider_url: str, tmp_path: Path, **kw: object) -> ProviderRelay:
    options: dict[str, object] = {"stall_limit_s": 30.0, "probe_wait_max_s": 2.0}
    options["probe_gap_s"] = 0.2
    # The relay's retries, quick: a call still fails after them as it did, in a fraction of
    # a second rather than the default's 1 + 2 + 4 s (retries have test_preflight_retries.py).
    options["retry"] = RetryPolicy(base_s=0.01, max_wait_s=0.05)
    options.update(kw)
    return ProviderRelay(
        kind="openai-compatible",
        base_url=provider_url,
        model=MODEL,
        key=KEY,
        credential=Credential("Authorization", "Bearer "),
        log_path=tmp_path / "provider.jsonl",
        **options,  # type: ignore[arg-type]
    ).start()


@pytest.fixture
def relays(tmp_path: Path) -> Iterator[Callable[..., ProviderRelay]]:
    made: list[ProviderRelay] = []

    def make(provider: FakeProvider | str, **kw: object) -> ProviderRelay:
        url = provider if isinstance(provider, str) else provider.base_url
        relay = _relay(url, tmp_path, **kw)
        made.append(relay)
        return relay

    yield make
    for relay in made:
        relay.close()


def _body(**extra: object) -> dict[str, object]:
    body: dict[str, object] = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "the secret plan"}],
        "stream": True,
        "reasoning_effort": "high",
    }
    body.update(extra)
    return body


def call(
    relay: ProviderRelay,
    body: dict[str, object] | bytes | None = None,
    *,
    path: str = "/v1/chat/completions",
    method: str = "POST",
    headers: dict[str, str] | None = None,
) -> tuple[int, bytes]:
    """One request to the relay, as the controller would send it."""
    conn = http.client.HTTPConnection("127.0.0.1", relay.port, timeout=30)
    data = body if isinstance(body, bytes) else json.dumps(body or _body()).encode()
    conn.request(method, path, body=data if method == "POST" else None, headers=headers or {})
    answer = conn.getresponse()
    got = answer.read()
    conn.close()
    return answer.status, got


def entries(tmp_path: Path, kind: str | None = None) -> list[dict[str, object]]:
    lines = (tmp_path / "provider.jsonl").read_text().splitlines()
    found = [json.loads(line) for line in lines]
    return [e for e in found if kind is None or e["kind"] == kind]


# -- what passes, and how --------------------------------------------------------------------


def test_a_call_gets_the_real_key_and_none_of_the_callers_credentials(
    relays: Callable[..., ProviderRelay], tmp_path: Path
) -> None:
    with FakeProvider(lambda r: Reply(text="hi", prompt_tokens=900, cached_tokens=200)) as p:
        relay = relays(p)
        stolen = {
            "Authorization": "Bearer sk-someone-elses",
            "x-api-key": "sk-other",
            "x-goog-api-key": "g-other",
            "api-key": "az-other",
            "Cookie": "session=1",
            "Proxy-Authorization": "Basic eDp5",
            "OpenAI-Organization": "org-someone-else",
            "OpenAI-Project": "proj-someone-else",
        }
        status, got = call(relay, headers=stolen)
    assert status == 200 and b"data: [DONE]" in got
    (request,) = p.requests
    headers = {k.lower(): v for k, v in request.headers.items()}
    assert headers["authorization"] == f"Bearer {KEY}"
    dropped = {"x-api-key", "x-goog-api-key", "api-key", "cookie", "proxy-authorization"}
    dropped |= {"openai-organization", "openai-project"}
    assert not dropped & set(headers)
    assert request.body["reasoning_effort"] == "high"  # the effort goes through as sent
    # The provider's own usage, read by the relay: what the provider reported.
    tokens = relay.totals.tokens
    assert (tokens.input, tokens.cache_read, tokens.output) == (700, 200, 40)
    assert relay.totals.calls == relay.totals.answered == 1
    relay.close()
    log = (tmp_path / "provider.jsonl").read_text()
    assert KEY not in log and "secret plan" not in log  # metadata only
    (entry,) = entries(tmp_path, "call")
    assert entry["status"] == 200 and entry["outcome"] == "answered"
    assert entry["bytes_up"] > 0 and entry["bytes_down"] == len(got)
    assert entry["usage"] == {
        "input": 700,
        "output": 40,
        "reasoning": 0,
        "cache_read": 200,
        "cache_write": 0,
    }


def test_a_stream_is_passed_on_as_it_comes(relays: Callable[..., ProviderRelay]) -> None:
    """An SSE answer is not buffered: the first event reaches the caller while the provider
    is still sending the rest."""
    with FakeProvider(lambda r: Reply(text="slowly", chunk_delay_s=0.4)) as p:
        relay = relays(p)
        conn = http.client.HTTPConnection("127.0.0.1", relay.port, timeout=30)
        conn.request("POST", "/v1/chat/completions", body=json.dumps(_body()))
        answer = conn.getresponse()
        first = answer.readline()
        first_at = time.monotonic()
        rest = answer.read()
        conn.close()
    assert first.startswith(b"data: ") and b"[DONE]" in rest
    assert len(p.chunks_sent) >= 4
    assert first_at < p.chunks_sent[-1] - 0.8, "the relay held the stream back"


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "why"),
    [
        ("GET", "/v1/models", None, 405, "method GET"),
        ("POST", "/v1/files", _body(), 403, "not a model call"),
        ("POST", "/v1/fine_tuning/jobs", _body(), 403, "not a model call"),
        ("POST", "/v2/chat/completions", _body(), 403, "only paths under /v1/"),
        ("POST", "http://evil.example/v1/chat/completions", _body(), 403, "only paths"),
        ("POST", "/v1/../v1/chat/completions", _body(), 403, "relative path"),
        ("POST", "/v1/chat%2Fcompletions", _body(), 403, "encoded"),
        ("POST", "/v1/chat/completions", _body(model="stronger-model"), 403, "only model"),
        ("POST", "/v1/chat/completions", b"not json", 400, "not JSON"),
        ("POST", "/v1/chat/completions", _body(plugins=[{"id": "web"}]), 403, "'plugins'"),
        (
            "POST",
            "/v1/chat/completions",
            _body(tools=[{"type": "web_search"}]),
            403,
            "provider-side tools",
        ),
        (
            "POST",
            "/v1/chat/completions",
            _body(web_search_options={}),
            403,
            "web_search_options",
        ),
    ],
)
def test_anything_but_a_call_of_the_runs_model_is_refused_by_the_relay(
    relays: Callable[..., ProviderRelay],
    tmp_path: Path,
    method: str,
    path: str,
    body: dict[str, object] | bytes | None,
    status: int,
    why: str,
) -> None:
    with FakeProvider(lambda r: Reply(text="hi")) as p:
        relay = relays(p)
        got_status, got = call(relay, body, path=path, method=method)
    assert got_status == status
    assert why in json.loads(got)["error"]["message"]
    assert p.requests == []  # nothing reached the provider
    assert relay.totals.refused == 1 and relay.totals.calls == 0
    (entry,) = entries(tmp_path, "refused")
    assert why in str(entry["error"])


def test_the_effort_stays_what_the_scaffold_sent_before_the_model_could_act(
    relays: Callable[..., ProviderRelay],
) -> None:
    with FakeProvider(lambda r: Reply(text="hi")) as p:
        relay = relays(p)
        assert call(relay, _body(reasoning_effort="low"))[0] == 200  # the scaffold's first call
        assert call(relay, _body(reasoning_effort="low"))[0] == 200
        for other in ("high", None):
            status, got = call(relay, _body(reasoning_effort=other))
            assert status == 403 and b"reasoning-effort" in got
        body = _body()
        del body["reasoning_effort"]
        assert call(relay, body)[0] == 403
    assert len(p.requests) == 2


def test_the_providers_certificate_is_checked(
    relays: Callable[..., ProviderRelay], tmp_path: Path
) -> None:
    with FakeProvider(lambda r: Reply(text="hi"), tls=True) as p:
        unverified = relays(p)  # the system's CAs: the test CA is not one of them
        status, got = call(unverified)
        assert status == 502 and b"CERTIFICATE_VERIFY_FAILED" in got
        assert p.requests == []
        trusting = relays(p, ssl_context=ssl.create_default_context(cafile=TLS_DIR / "ca.pem"))
        status, got = call(trusting)
    assert status == 200 and b"[DONE]" in got
    assert len(p.requests) == 1


def test_the_shipped_providers_name_their_key_header(tmp_path: Path) -> None:
    from toolkit.agents.providers import DEFAULT_FILE

    providers = load_providers(DEFAULT_FILE)
    assert providers["anthropic"].credential == Credential("x-api-key")
    assert providers["google"].credential == Credential("x-goog-api-key")
    assert providers["openai"].credential == Credential("Authorization", "Bearer ")
    assert providers["openrouter"].credential == Credential("Authorization", "Bearer ")
    custom = tmp_path / "p.toml"
    custom.write_text(
        '[azure]\nkind = "openai-compatible"\nbase_url = "https://x.example/v1"\n'
        'key_env = "K"\nkey_header = "api-key"\n'
    )
    assert load_providers(custom)["azure"].credential == Credential("api-key")


# -- deciding that the provider failed -------------------------------------------------------


def _probes(provider: FakeProvider) -> list[Request]:
    return [r for r in provider.requests if PROBE_TEXT in json.dumps(r.body)]


def test_a_failing_provider_is_confirmed_by_the_harnesss_own_probe(
    relays: Callable[..., ProviderRelay], tmp_path: Path
) -> None:
    with FakeProvider(lambda r: Reply(status=500)) as p:
        relay = relays(p, stall_limit_s=0.5)
        assert call(relay)[0] == 500
        assert relay.problem() is None  # one failure, within the limit
        time.sleep(0.6)
        assert call(relay)[0] == 500
        verdict = wait_for(relay.problem)
    assert isinstance(verdict, str)
    assert "2 model call(s) in a row failed" in verdict and "HTTP 500" in verdict
    assert "probe call failed too (HTTP 500)" in verdict and "infrastructure" in verdict
    assert len(_probes(p)) == 3  # asked three times before deciding
    assert len(entries(tmp_path, "probe")) == 3


def test_calls_that_fail_on_their_own_void_nothing(
    relays: Callable[..., ProviderRelay], tmp_path: Path
) -> None:
    """Calls the provider fails (crafted by the model, say) while it answers the harness's
    probe: no verdict, during the run or when the scaffold exits."""

    def provider_fails_calls_with_tools(request: Request) -> Reply:
        return Reply(status=500) if request.body.get("tools") else Reply(text="OK")

    with FakeProvider(provider_fails_calls_with_tools) as p:
        relay = relays(p, stall_limit_s=0.3)
        assert call(relay, _body(tools=[{"type": "function", "function": {"name": "f"}}]))[0] == 500
        time.sleep(0.4)
        assert call(relay, _body(tools=[{"type": "function", "function": {"name": "g"}}]))[0] == 500
        assert wait_for(lambda: relay.problem() or entries(tmp_path, "cleared"))
        assert relay.problem() is None
        call(relay, _body(tools=[{"type": "function", "function": {"name": "h"}}]))
        assert relay.final_problem(exited=True) is None  # exited during a spell: probed again
    assert len(_probes(p)) == 2
    assert relay.problem() is None


def test_a_scaffold_that_exits_while_the_provider_fails_is_invalid(
    relays: Callable[..., ProviderRelay],
) -> None:
    with FakeProvider(lambda r: Reply(status=401)) as p:
        relay = relays(p, stall_limit_s=60)
        assert call(relay)[0] == 401
        assert relay.final_problem(exited=False) is None  # killed at the deadline: no check
        assert _probes(p) == []
        verdict = relay.final_problem(exited=True)
    assert verdict and verdict.startswith("the scaffold stopped while the model provider")
    assert "HTTP 401" in verdict


def test_a_provider_error_that_quotes_the_key_reaches_the_controller_without_it(
    relays: Callable[..., ProviderRelay],
) -> None:
    # A provider's error may quote the credential it got ("Incorrect API key provided: sk-...");
    # the answer is passed on to the controller, where the model reads it: never the key.
    said = json.dumps({"error": {"message": f"Incorrect API key provided: {KEY}"}}).encode()
    with FakeProvider(lambda r: Reply(status=401, error=said)) as p:
        relay = relays(p)
        status, got = call(relay)
    assert status == 401
    assert KEY.encode() not in got
    assert b"Incorrect API key provided: [redacted]" in got


def test_a_slow_provider_that_answers_is_no_failure(
    relays: Callable[..., ProviderRelay],
) -> None:
    with FakeProvider(lambda r: Reply(text="late", delay_s=0.8)) as p:
        relay = relays(p, stall_limit_s=0.2)
        for _ in range(2):
            assert call(relay)[0] == 200
            assert relay.problem() is None
        assert relay.final_problem(exited=True) is None
    assert _probes(p) == []


def test_an_unreachable_provider_is_confirmed(
    relays: Callable[..., ProviderRelay],
) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, never listening: connections are refused
        relay = relays(f"http://127.0.0.1:{port}/v1", stall_limit_s=0.2)
        status, got = call(relay)
        assert status == 502 and b"unreachable" in got
        time.sleep(0.3)
        verdict = wait_for(relay.problem)
    assert isinstance(verdict, str) and "unreachable: ConnectionRefusedError" in verdict


class _RateLimited:
    """A provider with a real rate limit: more than `limit` calls in `window_s` are 429."""

    def __init__(self, limit: int, window_s: float) -> None:
        self.limit, self.window_s = limit, window_s
        self.times: list[float] = []
        self.lock = threading.Lock()

    def __call__(self, request: Request) -> Reply:
        with self.lock:
            now = time.monotonic()
            self.times = [t for t in self.times if now - t < self.window_s] + [now]
            over = len(self.times) > self.limit
        return Reply(status=429, headers={"retry-after": "1"}) if over else Reply(text="OK")


def test_a_model_that_spends_the_rate_limit_itself_gets_no_reroll(
    relays: Callable[..., ProviderRelay], tmp_path: Path
) -> None:
    """The model's commands hammer the provider through the relay until every call is 429.
    The probe, sent while the controller's calls are held, finds the provider working."""
    limiter = _RateLimited(limit=3, window_s=1.0)
    stop = threading.Event()
    with FakeProvider(limiter) as p:
        # No retries: the relay's own (a second apart, as the 429 asks) would space the
        # threads' calls out to about the limit, so the failure spell came by chance (9-24 s
        # against a 20-s wait).
        relay = relays(p, stall_limit_s=0.5, probe_wait_max_s=3.0, retry=RetryPolicy(retries=0))

        def hammer() -> None:
            while not stop.is_set():
                call(relay)

        threads = [threading.Thread(target=hammer, daemon=True) for _ in range(3)]
        for thread in threads:
            thread.start()
        try:
            assert wait_for(lambda: relay.problem() or entries(tmp_path, "cleared"), timeout=20)
            assert relay.problem() is None
        finally:
            stop.set()
            for thread in threads:
                thread.join(timeout=30)
    kinds = [e["kind"] for e in entries(tmp_path)]
    assert "hold" in kinds and kinds.count("probe") >= 2
    # While held (from the first probe, refused 429, to the one answered, at least the 1 s the
    # 429 asks), none of the controller's calls reached the provider (but those already on
    # their way: half a second for a relay thread a loaded host has not yet run).
    probes = [r.arrived for r in _probes(p)]
    others = [r.arrived for r in p.requests if r.arrived not in probes]
    assert not [t for t in others if probes[0] + 0.5 < t < probes[-1]]


def test_a_provider_that_keeps_rate_limiting_a_quiet_client_is_confirmed(
    relays: Callable[..., ProviderRelay],
) -> None:
    with FakeProvider(lambda r: Reply(status=429, headers={"retry-after": "0.2"})) as p:
        relay = relays(p, stall_limit_s=0.2)
        assert call(relay)[0] == 429
        time.sleep(0.3)
        verdict = wait_for(relay.problem)
    assert isinstance(verdict, str) and "HTTP 429" in verdict
    assert len(_probes(p)) == 3


# -- the provider's own usage, in each API's shape ---------------------------------------------


def _sse(*events: tuple[str | None, dict[str, object]]) -> bytes:
    out = b""
    for name, data in events:
        out += (f"event: {name}\n" if name else "").encode()
        out += b"data: " + json.dumps(data).encode() + b"\n\n"
    return out


USAGE_SHAPES = {
    "anthropic": _sse(
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "usage": {
                        "input_tokens": 12,
                        "cache_creation_input_tokens": 100,
                        "cache_read_input_tokens": 300,
                        "output_tokens": 1,
                    }
                },
            },
        ),
        ("content_block_delta", {"type": "content_block_delta", "delta": {"text": "hi"}}),
        ("message_delta", {"type": "message_delta", "usage": {"output_tokens": 57}}),
    ),
    "openai-responses": _sse(
        ("response.output_text.delta", {"type": "response.output_text.delta", "delta": "hi"}),
        (
            "response.completed",
            {
                "type": "response.completed",
                "response": {
                    "usage": {
                        "input_tokens": 412,
                        "input_tokens_details": {"cached_tokens": 300},
                        "output_tokens": 77,
                        "output_tokens_details": {"reasoning_tokens": 20},
                    }
                },
            },
        ),
    ),
    "google": _sse(
        (None, {"candidates": [], "usageMetadata": {"promptTokenCount": 412}}),
        (
            None,
            {
                "candidates": [],
                "usageMetadata": {
                    "promptTokenCount": 412,
                    "cachedContentTokenCount": 300,
                    "candidatesTokenCount": 57,
                    "thoughtsTokenCount": 20,
                },
            },
        ),
    ),
}
EXPECTED = {
    "anthropic": {"input": 12, "output": 57, "reasoning": 0, "cache_read": 300, "cache_write": 100},
    "openai-responses": {
        "input": 112,
        "output": 57,
        "reasoning": 20,
        "cache_read": 300,
        "cache_write": 0,
    },
    "google": {"input": 112, "output": 57, "reasoning": 20, "cache_read": 300, "cache_write": 0},
}


@pytest.mark.parametrize("shape", sorted(USAGE_SHAPES))
def test_usage_is_read_from_each_apis_stream_in_any_chunking(shape: str) -> None:
    from toolkit.agents.provider_api import UsageReader

    data = USAGE_SHAPES[shape]
    for size in (1, 7, len(data)):  # however the stream is cut into chunks
        reader = UsageReader("text/event-stream; charset=utf-8")
        for start in range(0, len(data), size):
            reader.feed(data[start : start + size])
        reader.finish()
        tokens = reader.tokens()
        assert tokens is not None and tokens.as_dict() == EXPECTED[shape], (shape, size)
        assert reader.error is None


def test_an_error_inside_a_stream_that_began_well_is_a_failure() -> None:
    from toolkit.agents.provider_api import UsageReader

    reader = UsageReader("text/event-stream")
    reader.feed(_sse(("error", {"type": "error", "error": {"type": "overloaded_error"}})))
    reader.finish()
    assert reader.error and reader.tokens() is None
    chat = UsageReader("text/event-stream")
    chat.feed(b'data: {"choices":[{"delta":{"content":"the word error"}}]}\n\n')
    chat.finish()
    assert chat.error is None  # the model's text is not an error
