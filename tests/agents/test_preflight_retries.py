"""The relay's bounded retries: a provider that says "not now" (429, 5xx, no connection) before
any byte of its answer gets the same call again, a few times, with backoff; the result counts
the retries; a call that still fails is a failed call as before (spell, probe, verdict); an
answer that broke off after it began is never sent again.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.agents.conftest import AgentFactory, SpecFactory
from tests.agents.fake_provider import FakeProvider, Reply, Request
from tests.agents.relay_calls import (
    RelayFactory,
    body_for,
    message,
    recorded_usage,
    send,
)
from tests.waiting import wait_for
from toolkit.agents.provider_api import PROBE_TEXT
from toolkit.agents.relay.retry import RetryPolicy, retry_after_s
from toolkit.run.orchestrate import execute_run

QUICK = RetryPolicy(retries=3, base_s=0.05, max_wait_s=0.5, window_s=30.0, jitter=lambda: 0.5)


def _log(tmp_path: Path, kind: str) -> list[dict[str, object]]:
    lines = (tmp_path / "provider.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["kind"] == kind]


def _calls_only(script: Callable[[Request], Reply]) -> Callable[[Request], Reply]:
    """The script for the scaffold's calls; the harness's probe is always answered."""

    def answer(request: Request) -> Reply:
        if any(m.get("content") == PROBE_TEXT for m in request.messages):
            return Reply(text="OK")
        return script(request)

    return answer


def test_a_call_answered_503_twice_then_200_succeeds_and_counts_two_retries(
    relays: RelayFactory, tmp_path: Path
) -> None:
    statuses = iter([503, 503])

    def flaky(request: Request) -> Reply:
        return Reply(status=next(statuses, 200), text="hi", headers={})

    with FakeProvider(flaky) as provider:
        relay = relays(provider, retry=QUICK)
        status, data = send(relay, "openai-compatible", body_for("chat"))
        assert status == 200 and '"content": "hi"' in str(data["raw"])
        assert send(relay, "openai-compatible", body_for("chat"))[0] == 200  # no retry needed
    assert len(provider.requests) == 4  # 503, 503, 200; then 200
    relay.close()
    totals = relay.totals
    assert (totals.calls, totals.answered, totals.failed) == (2, 2, 0)
    assert (totals.retries, totals.retried_calls) == (2, 1)
    retries = _log(tmp_path, "retry")
    assert [(e["retry"], e["after"]) for e in retries] == [(1, "HTTP 503"), (2, "HTTP 503")]
    calls = _log(tmp_path, "call")
    assert calls[0]["retries"] == 2 and calls[0]["status"] == 200 and "retries" not in calls[1]
    # The result counts them; tokens are the answers' (each answer once).
    usage = recorded_usage(relay)
    assert usage.provider_retries == 2 and usage.retried_calls == 1
    assert usage.model_calls == 2
    assert relay.spend.tokens == 2 * (1000 + 40)
    assert relay.problem() is None and relay.final_problem(exited=True) is None


def test_retry_after_is_honoured_and_capped(relays: RelayFactory, tmp_path: Path) -> None:
    asked = iter(["0.4", "3600"])

    def limited(request: Request) -> Reply:
        wait = next(asked, None)
        if wait is None:
            return Reply(text="hi")
        return Reply(status=429, headers={"retry-after": wait})

    policy = RetryPolicy(retries=3, base_s=0.01, max_wait_s=0.6, jitter=lambda: 0.0)
    with FakeProvider(limited) as provider:
        relay = relays(provider, retry=policy)
        assert send(relay, "openai-compatible", body_for("chat"))[0] == 200
    gaps = [
        b.arrived - a.arrived
        for a, b in zip(provider.requests, provider.requests[1:], strict=False)
    ]
    assert gaps[0] >= 0.4  # as the provider asked, not the 0.01 s backoff
    assert 0.6 <= gaps[1] < 5  # an hour asked, the cap given
    assert [e["wait_s"] for e in _log(tmp_path, "retry")] == [0.4, 0.6]


def test_a_provider_that_always_fails_is_still_judged_by_the_spell_and_the_probe(
    relays: RelayFactory, tmp_path: Path
) -> None:
    with FakeProvider(lambda r: Reply(status=503)) as provider:
        relay = relays(provider, retry=QUICK, stall_limit_s=0.2, probe_gap_s=0.05)
        status, _ = send(relay, "openai-compatible", body_for("chat"))
        assert status == 503  # after its retries, the provider's own answer is passed on
        assert len(provider.requests) == 1 + QUICK.retries
        assert relay.totals.failed == 1 and relay.totals.retries == QUICK.retries
        verdict = relay.final_problem(exited=True)
    assert verdict is not None and "probe call failed too (HTTP 503)" in verdict
    assert "1 model call(s) in a row failed" in verdict


def test_calls_that_fail_after_retries_but_a_working_probe_void_nothing(
    relays: RelayFactory,
) -> None:
    """The existing rule holds: failures the probe does not confirm are the calls' own."""
    with FakeProvider(_calls_only(lambda r: Reply(status=500))) as provider:
        relay = relays(provider, retry=QUICK, stall_limit_s=0.1, probe_gap_s=0.05)
        assert send(relay, "openai-compatible", body_for("chat"))[0] == 500
        assert relay.final_problem(exited=True) is None
    assert relay.totals.retries == QUICK.retries


def test_an_error_that_is_not_transient_is_not_retried(relays: RelayFactory) -> None:
    with FakeProvider(lambda r: Reply(status=401)) as provider:
        relay = relays(provider, retry=QUICK)
        assert send(relay, "openai-compatible", body_for("chat"))[0] == 401
    assert len(provider.requests) == 1 and relay.totals.retries == 0


def test_an_unreachable_provider_is_retried_then_fails_as_before(
    relays: RelayFactory, tmp_path: Path
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    relay = relays(_Nowhere(port), retry=QUICK)
    status, data = send(relay, "openai-compatible", body_for("chat"))
    assert status == 502 and "unreachable" in message(data)
    assert relay.totals.retries == QUICK.retries and relay.totals.failed == 1
    assert all("unreachable" in str(e["after"]) for e in _log(tmp_path, "retry"))


def test_a_certificate_the_relay_does_not_trust_is_not_retried(relays: RelayFactory) -> None:
    with FakeProvider(lambda r: Reply(text="hi"), tls=True) as provider:
        relay = relays(provider, retry=QUICK)  # the system's CAs: not the test CA
        status, data = send(relay, "openai-compatible", body_for("chat"))
    assert status == 502 and "SSLCertVerificationError" in message(data)
    assert relay.totals.retries == 0 and relay.totals.failed == 1


class _Nowhere(FakeProvider):
    """Only a base URL: a port nothing listens on."""

    def __init__(self, port: int) -> None:  # no server: nothing is started
        self._port = port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}/v1"


def test_a_stream_that_broke_off_midway_is_not_sent_again(
    relays: RelayFactory, tmp_path: Path
) -> None:
    """The answer began (the scaffold got its head and first bytes), then the connection
    died: one send only, a failed call."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    port = server.getsockname()[1]
    accepted: list[int] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            accepted.append(1)
            conn.recv(65536)
            head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            head += b"transfer-encoding: chunked\r\n\r\n"
            chunk = b'data: {"choices": []}\n\n'
            conn.sendall(head + b"%x\r\n%s\r\n" % (len(chunk), chunk))
            time.sleep(0.1)
            conn.close()  # no final chunk: the stream broke off

    threading.Thread(target=serve, daemon=True).start()
    try:
        relay = relays(_Nowhere(port), retry=QUICK)
        # The controller sees a broken answer, however its client reports it.
        with contextlib.suppress(Exception):
            send(relay, "openai-compatible", body_for("chat"))
        assert relay.totals.calls == 1 and relay.totals.failed == 1
        assert relay.totals.retries == 0 and len(accepted) == 1
        assert not _log(tmp_path, "retry")
    finally:
        server.close()


def test_retries_stop_when_the_relay_closes(relays: RelayFactory, tmp_path: Path) -> None:
    slow = RetryPolicy(retries=3, base_s=20.0, max_wait_s=20.0, window_s=100.0)
    with FakeProvider(lambda r: Reply(status=503)) as provider:
        relay = relays(provider, retry=slow)
        got: list[tuple[int, dict[str, object]]] = []
        thread = threading.Thread(
            target=lambda: got.append(send(relay, "openai-compatible", body_for("chat")))
        )
        thread.start()
        # Closed once the relay is waiting to retry (it logs the retry, then waits), however
        # slow the host: closed before that, the 503 would be passed on as it is.
        wait_for(lambda: _log(tmp_path, "retry"), timeout=30)
        started = time.monotonic()
        relay.close()
        thread.join(10)
        took = time.monotonic() - started
    assert len(got) == 1 and len(provider.requests) == 1
    status, answer = got[0]
    assert status == 502 and "HTTP 503, then the run ended before a retry" in message(answer)
    assert relay.totals.failed == 1 and relay.totals.retries == 1
    print(f"a retry wait ended {took:.2f}s after the relay closed")


def test_the_policy_backs_off_exponentially_within_its_bounds() -> None:
    policy = RetryPolicy(retries=3, base_s=1.0, max_wait_s=3.0, window_s=10.0, jitter=lambda: 1.0)
    assert [policy.wait_s(n, None) for n in (1, 2, 3)] == [1.0, 2.0, 3.0]
    low = RetryPolicy(base_s=1.0, jitter=lambda: 0.0)
    assert [low.wait_s(n, None) for n in (1, 2, 3)] == [0.5, 1.0, 2.0]
    assert low.wait_s(1, 7.0) == 7.0 and low.wait_s(1, 1e9) == low.max_wait_s
    assert policy.allows(3, 0.0, 1.0) and not policy.allows(4, 0.0, 1.0)
    assert not policy.allows(1, 9.5, 1.0)  # past the window
    assert retry_after_s("2") == 2.0 and retry_after_s(None, "1500") == 1.5
    assert retry_after_s("Wed, 21 Oct 2015 07:28:00 GMT") is None
    assert retry_after_s("nan") is None and retry_after_s("-3") is None


@pytest.mark.slow
def test_a_whole_run_through_a_provider_that_answers_503_twice_records_two_retries(
    make_agent: AgentFactory, make_spec: SpecFactory
) -> None:
    """The scaffold never sees the two 503s: its first call is answered, the run goes on, and
    the result counts the retries."""
    failures = iter([503, 503])

    def model(request: Request) -> Reply:
        if not request.body.get("tools"):
            return Reply(text="A title")  # the scaffold's own side calls
        status = next(failures, 200)
        return Reply(status=status) if status != 200 else Reply(text="Done.")

    with FakeProvider(model) as provider:
        agent = make_agent(provider, relay_options={"retry": QUICK})
        result = execute_run(make_spec(agent, budget=120, per_call=60, reserved=10))
    assert result.status != "invalid", result.status_reason
    usage = result.usage
    assert usage.provider_retries == 2 and usage.retried_calls == 1, usage
    assert usage.model_calls == len(provider.requests) - 2
    tool_calls = provider.agent_requests()
    assert [r.turn for r in tool_calls] == [0, 0, 0]  # one call of the scaffold, sent 3 times
