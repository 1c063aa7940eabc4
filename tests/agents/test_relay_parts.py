"""The relay's parts, each alone with fakes of the others: the verdict with a fake forwarder
and fake books, the stream relay with a fake forwarder and a fake settlement, the accounting
with nothing but a file. (The whole relay, in front of a scripted provider: test_relay*.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.waiting import wait_for
from toolkit.agents.relay import accounting as accounting_module
from toolkit.agents.relay.accounting import Accounting
from toolkit.agents.relay.budget import RelayLimits, Reservation, Spend
from toolkit.agents.relay.forward import Exchange, Hold, Sent
from toolkit.agents.relay.stream import Ended, Outgoing, StreamRelay
from toolkit.agents.relay.verdict import Verdict

KEY = "sk-parts-key"


# -- the verdict, with a fake forwarder (`Prober`) and fake books ---------------------------


class FakeProber:
    """Answers each probe with the next status (None: no answer at all)."""

    def __init__(self, *statuses: int | None) -> None:
        self.statuses = list(statuses)
        self.calls = 0

    def exchange(
        self, path: str, body: bytes, extra: dict[str, str], timeout_s: float | None = None
    ) -> Exchange:
        self.calls += 1
        status = self.statuses.pop(0)
        if status is None:
            raise ConnectionRefusedError("connection refused")
        said = json.dumps({"error": {"message": f"the key {KEY} is not welcome"}})
        return Exchange(status, "0" if status == 429 else None, said.encode())

    def redact_text(self, text: str) -> str:
        return text.replace(KEY, "[redacted]")


class FakeBooks:
    def __init__(self) -> None:
        self.entries: list[dict[str, object]] = []
        self.probes = 0

    def record(self, entry: dict[str, object], force: bool = False) -> None:
        self.entries.append(entry)

    def count_probe(self) -> None:
        self.probes += 1

    def kinds(self) -> list[object]:
        return [e["kind"] for e in self.entries]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _verdict(prober: FakeProber, books: FakeBooks, clock: FakeClock, hold: Hold) -> Verdict:
    return Verdict(
        kind="openai-compatible",
        model="m",
        prober=prober,
        books=books,
        hold=hold,
        clock=clock,
        stall_limit_s=10.0,
        probe_wait_max_s=0.05,
        probe_gap_s=0.0,
    )


def test_a_spell_past_the_stall_limit_is_probed_and_a_failed_probe_is_the_verdict() -> None:
    prober, books, clock = FakeProber(503, 503, 503), FakeBooks(), FakeClock()
    verdict = _verdict(prober, books, clock, Hold())
    verdict.heard("HTTP 502")
    clock.now += 5
    verdict.heard("unreachable: ConnectionResetError: reset")
    assert verdict.problem() is None and prober.calls == 0  # within the limit: no probe
    clock.now += 6
    assert verdict.problem() is None  # the check starts, in the background
    found = wait_for(verdict.problem)
    assert isinstance(found, str)
    assert found.startswith("the model provider failed: 2 model call(s) in a row failed")
    assert "HTTP 502 x1, unreachable x1" in found and "(HTTP 503)" in found
    assert prober.calls == books.probes == 3
    assert books.kinds() == ["probe"] * 3


def test_a_probe_answered_clears_the_spell_and_lets_held_calls_go() -> None:
    prober, books, clock, hold = FakeProber(429, 200), FakeBooks(), FakeClock(), Hold()
    verdict = _verdict(prober, books, clock, hold)
    verdict.heard("HTTP 429")
    clock.now += 11
    verdict.problem()
    assert wait_for(lambda: "cleared" in books.kinds())
    # Rate limited: the controller's calls were held while the probe waited, then let go.
    assert books.kinds() == ["probe", "hold", "probe", "cleared"]
    assert not hold.held
    assert verdict.problem() is None
    assert verdict.final_problem(exited=True) is None and prober.calls == 2


def test_an_answered_call_ends_the_spell() -> None:
    prober, books, clock = FakeProber(), FakeBooks(), FakeClock()
    verdict = _verdict(prober, books, clock, Hold())
    verdict.heard("HTTP 503")
    verdict.heard(None)
    clock.now += 60
    assert verdict.problem() is None
    assert verdict.final_problem(exited=True) is None and prober.calls == 0


def test_a_scaffold_that_exits_during_a_spell_is_judged_by_a_probe_then() -> None:
    prober, books, clock = FakeProber(None, None, None), FakeBooks(), FakeClock()
    verdict = _verdict(prober, books, clock, Hold())
    verdict.heard("HTTP 500")
    assert verdict.final_problem(exited=False) is None and prober.calls == 0  # short, alive
    found = verdict.final_problem(exited=True)
    assert found is not None
    assert found.startswith("the scaffold stopped while the model provider was failing")
    assert "unreachable: ConnectionRefusedError: connection refused" in found
    assert prober.calls == 3


def test_the_probe_says_the_providers_word_with_the_key_blanked() -> None:
    prober, books = FakeProber(401), FakeBooks()
    result = _verdict(prober, books, FakeClock(), Hold()).probe_once()
    assert result.failed and result.status == 401
    assert result.detail == "the key [redacted] is not welcome"
    assert books.entries[0]["outcome"] == "provider-failure"


# -- the stream relay, with a fake forwarder (`Sender`) and a fake settlement ---------------


class FakeAnswer:
    """What `http.client.HTTPResponse` gives the stream relay, from a list of chunks."""

    def __init__(self, status: int, chunks: list[bytes], content_type: str) -> None:
        self.status = status
        self.reason = "OK" if status < 300 else "Error"
        self.chunks = list(chunks)
        self.length: int | None = sum(map(len, chunks))
        self.will_close = False
        self.headers = {"content-type": content_type, "content-length": str(self.length)}
        self.headers["set-cookie"] = "tracking=1"

    def getheaders(self) -> list[tuple[str, str]]:
        return list(self.headers.items())

    def getheader(self, name: str, default: str | None = None) -> str | None:
        return self.headers.get(name.lower(), default)

    def read(self, limit: int = -1) -> bytes:
        data, self.chunks = b"".join(self.chunks), []
        return data

    def read1(self, limit: int = -1) -> bytes:
        return self.chunks.pop(0) if self.chunks else b""

    def isclosed(self) -> bool:
        return not self.chunks


class FakeSender:
    def __init__(self, sent: Sent) -> None:
        self.sent = sent
        self.released: list[bool] = []

    def send_with_retries(
        self, path: str, query: str, body: bytes, headers: dict[str, str], started: float
    ) -> Sent:
        return self.sent

    def release(self, conn: object, reusable: bool) -> None:
        self.released.append(reusable)

    def redact(self, data: bytes) -> bytes:
        return data.replace(KEY.encode(), b"[redacted]")


class Wire:
    def __init__(self, events: list[object]) -> None:
        self.events = events

    def write(self, data: bytes) -> None:
        self.events.append(("write", data))

    def flush(self) -> None:
        pass


class FakeHandler:
    """The controller's side of one request, recording what reaches it, in order."""

    def __init__(self, events: list[object]) -> None:
        self.events = events
        self.wfile = Wire(events)
        self.status: int | None = None
        self.sent_headers: dict[str, str] = {}
        self.close_connection = False

    def send_response(self, status: int, reason: str | None = None) -> None:
        self.status = status

    def send_header(self, name: str, value: str) -> None:
        self.sent_headers[name.lower()] = value

    def end_headers(self) -> None:
        self.events.append("head")


def _relay(sent: Sent) -> tuple[StreamRelay, FakeSender, list[object], list[str]]:
    events: list[object] = []
    answered: list[str] = []
    sender = FakeSender(sent)
    relay = StreamRelay(
        "openai-compatible",
        sender,
        settle=lambda ended: events.append(ended),
        answered=lambda: answered.append("first bytes"),
    )
    return relay, sender, events, answered


def _call(body: bytes = b'{"model": "m"}') -> Outgoing:
    held = Reservation(tokens=100, cost_usd=0.0)
    return Outgoing("chat/completions", "", body, {}, {"pinned": ["x"]}, 0.0, held)


def test_a_streamed_answer_is_settled_before_its_last_bytes_reach_the_controller() -> None:
    chunks = [
        b'data: {"choices": [{"delta": {"content": "hi"}}]}\n\n',
        b'data: {"usage": {"prompt_tokens": 7, "completion_tokens": 3}}\n\ndata: [DONE]\n\n',
    ]
    answer = FakeAnswer(200, chunks, "text/event-stream")
    relay, sender, events, answered = _relay(Sent(answer=(object(), answer)))  # type: ignore[arg-type]
    handler = FakeHandler(events)
    relay.forward(handler, _call())  # type: ignore[arg-type]
    assert handler.status == 200 and "set-cookie" not in handler.sent_headers
    assert [e if isinstance(e, (str, tuple)) else "settled" for e in events] == [
        "head",
        ("write", chunks[0]),
        "settled",  # counted before the chunk that completes the answer leaves
        ("write", chunks[1]),
    ]
    ended = events[2]
    assert isinstance(ended, Ended) and ended.failure is None and not ended.cut_short
    assert ended.entry["outcome"] == "answered" and ended.entry["pinned"] == ["x"]
    assert ended.entry["bytes_down"] == sum(map(len, chunks))
    assert ended.tokens is not None and ended.tokens.output == 3
    assert answered == ["first bytes"] and sender.released == [True]


def test_an_error_answer_is_passed_on_with_the_key_blanked_and_settled_as_a_failure() -> None:
    said = json.dumps({"error": f"overloaded ({KEY})"}).encode()
    answer = FakeAnswer(503, [said], "application/json")
    relay, _, events, answered = _relay(Sent(answer=(object(), answer)))  # type: ignore[arg-type]
    handler = FakeHandler(events)
    relay.forward(handler, _call())  # type: ignore[arg-type]
    ended = next(e for e in events if isinstance(e, Ended))
    assert ended.failure == "HTTP 503" and ended.entry["outcome"] == "provider-failure"
    written = b"".join(e[1] for e in events if isinstance(e, tuple))
    assert handler.status == 503 and KEY.encode() not in written and b"[redacted]" in written
    assert answered == []  # no good answer reached the controller


def test_an_unreachable_provider_gets_the_relays_own_error_in_the_providers_format() -> None:
    sent = Sent(error="unreachable: ConnectionRefusedError: refused", retries=2)
    relay, _, events, _ = _relay(sent)
    handler = FakeHandler(events)
    relay.forward(handler, _call())  # type: ignore[arg-type]
    ended = next(e for e in events if isinstance(e, Ended))
    assert ended.failure == sent.error and ended.entry["retries"] == 2
    assert handler.status == 502
    body = json.loads(b"".join(e[1] for e in events if isinstance(e, tuple)))
    assert "the provider is unreachable" in json.dumps(body)


# -- the accounting, alone ----------------------------------------------------------------


def test_the_accounting_counts_logs_and_announces_once(tmp_path: Path) -> None:
    notes: list[str] = []
    books = Accounting(tmp_path / "provider.jsonl", note=notes.append)
    books.record({"kind": "before-open"})  # no file yet: nothing written, nothing raised
    books.open()
    entry: dict[str, object] = {"kind": "call", "bytes_up": 10, "bytes_down": 20, "retries": 2}
    books.count_call(entry, None, failure=None)
    books.count_call({**entry, "retries": 0}, None, failure="HTTP 500")
    books.count_dropped(10, 5)
    books.announce("the token budget is spent")
    books.announce("the token budget is spent")
    spend = Spend(RelayLimits(max_tokens_total=1000))
    books.record(books.summary(spend), force=True)
    books.close()
    t = books.totals
    assert (t.calls, t.answered, t.failed, t.retries, t.retried_calls) == (2, 1, 1, 2, 1)
    assert (t.bytes_up, t.bytes_down) == (30, 45)
    lines = [json.loads(line) for line in (tmp_path / "provider.jsonl").read_text().splitlines()]
    assert [line["kind"] for line in lines] == ["budget", "summary"]
    assert lines[1]["calls"] == 2 and lines[1]["retries"] == 2
    assert notes == [
        "provider relay: the token budget is spent: further model calls are refused "
        "(the run stays valid)"
    ]
    assert books.spend_summary(spend, spend.limits).startswith(
        "2 model call(s) passed on (2 retries for 1 of them); 0 tokens counted against the "
        "budget of 1,000"
    )


def test_the_accounting_log_stops_at_its_cap_but_not_for_the_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(accounting_module, "MAX_LOG_LINES", 3)
    books = Accounting(tmp_path / "provider.jsonl")
    books.open()
    for i in range(5):
        books.record({"kind": "call", "n": i})
    books.record({"kind": "summary"}, force=True)
    books.close()
    kinds = [json.loads(line)["kind"] for line in (tmp_path / "provider.jsonl").open()]
    assert kinds == ["call", "call", "log-full", "summary"]
