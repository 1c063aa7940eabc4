"""The run's token and cost budget, kept by the relay: a run of calls that crosses it, calls sent
at once near its end, the error the scaffold sees, and what the result records. A spent budget
is the run's own doing, never a provider failure.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from tests.agents.fake_provider import FakeProvider, Reply
from tests.agents.relay_calls import (
    RelayFactory,
    body_for,
    fake_provider_entry,
    log_entries,
    message,
    recorded_usage,
    send,
)
from toolkit.agents.provider_api import PROBE_TEXT, Tokens
from toolkit.agents.relay.budget import RelayLimits, Spend, limits_for
from toolkit.campaign.config import CampaignFile
from toolkit.campaign.job import make_job
from toolkit.campaign.plan import RunKey
from toolkit.results.model import Usage
from toolkit.tracks.model import Track

PER_CALL = 1000 + 40  # the fake provider's usage of one call: prompt + completion tokens


def test_a_run_that_crosses_its_token_budget_gets_the_budget_error_and_stays_valid(
    relays: RelayFactory, tmp_path: Path
) -> None:
    notes: list[str] = []
    # The third call's input (1,000 tokens, as the provider billed the first) still fits under
    # the budget: it crosses it by its output only (at most its cap).
    limits = RelayLimits(max_output_tokens=100, max_tokens_total=3 * PER_CALL - 20)
    with FakeProvider(lambda r: Reply(text="hi")) as p:
        relay = relays(p, limits=limits, note=notes.append, stall_limit_s=0.1)
        for _ in range(3):  # 1040, 2080, then 3120: the third call crosses the budget
            assert send(relay, "openai-compatible", body_for("chat"))[0] == 200
        answers = [send(relay, "openai-compatible", body_for("chat")) for _ in range(2)]
        # Calls refused for the budget are no provider failure: no probe, no verdict.
        assert relay.problem() is None
        assert relay.final_problem(exited=True) is None
        usage = recorded_usage(relay, fake_provider_entry(p.base_url))
    for status, answer in answers:
        assert status == 400 and "the run's token budget is spent" in message(answer)
        error = answer["error"]
        assert isinstance(error, dict) and error["code"] == "ari_budget_spent"
    assert len(p.requests) == 3  # the provider never saw the refused calls
    assert not [r for r in p.requests if PROBE_TEXT in json.dumps(r.body)]
    assert relay.totals.calls == 3 and relay.totals.failed == 0
    assert usage.budget_spent is True and usage.budget_refused_calls == 2
    assert usage.budget_tokens == 3 * PER_CALL and usage.max_tokens_total == limits.max_tokens_total
    assert usage.model_calls == 3 and usage.source == "provider"
    assert Usage.model_validate_json(usage.model_dump_json()) == usage  # it goes in the result
    # agent.log says so once, and how much was spent; provider.jsonl too.
    spent = [n for n in notes if "token budget is spent" in n]
    assert len(spent) == 2 and "the run stays valid" in spent[0] and "not a provider" in spent[1]
    log = [json.loads(line) for line in (tmp_path / "provider.jsonl").read_text().splitlines()]
    assert [e["kind"] for e in log].count("budget") == 1
    summary = log[-1]
    assert summary["budget_spent"] is True and summary["budget_tokens"] == 3 * PER_CALL


@pytest.mark.parametrize("kind", ["anthropic", "google", "openai"])
def test_the_budget_error_is_in_the_providers_own_format(relays: RelayFactory, kind: str) -> None:
    limits = RelayLimits(max_output_tokens=100, max_tokens_total=500)  # one body's bytes fit
    api = kind if kind != "openai" else "openai-responses"
    with FakeProvider(lambda r: Reply(text="hi")) as p:
        relay = relays(p, api, limits=limits)
        assert send(relay, api, body_for(api))[0] == 200  # its input fits; its output may cross
        status, answer = send(relay, api, body_for(api))
    assert status == 400 and "the run's token budget is spent" in message(answer)
    error = answer["error"]
    assert isinstance(error, dict)
    if kind == "anthropic":
        assert answer["type"] == "error" and error["type"] == "ari_budget_spent"
    elif kind == "google":
        assert error["code"] == 400 and error["status"] == "FAILED_PRECONDITION"
    else:
        assert error["type"] == "ari_budget_spent"
    assert len(p.requests) == 1


def test_a_cost_budget_is_kept_with_the_providers_file_prices(relays: RelayFactory) -> None:
    prices = {"input": 1000.0, "output": 1000.0}  # USD per million: $1.04 a call
    # the second call's input ($1.00 as the first was billed) fits: it crosses by its output
    limits = RelayLimits(max_output_tokens=100, max_cost_usd=2.06)
    with FakeProvider(lambda r: Reply(text="hi")) as p:
        relay = relays(p, limits=limits, prices=prices)
        statuses = [send(relay, "openai-compatible", body_for("chat"))[0] for _ in range(4)]
        usage = recorded_usage(relay, fake_provider_entry(p.base_url, prices))
    assert statuses == [200, 200, 400, 400] and len(p.requests) == 2
    assert usage.cost_usd == pytest.approx(2.08) and usage.cost_source == "providers-file"
    assert usage.budget_spent is True and usage.max_cost_usd == 2.06


def test_a_cost_budget_is_kept_with_the_cost_the_provider_reports(relays: RelayFactory) -> None:
    # Each call is reserved at the dearest rate reported so far ($0.02 for 1,040 tokens: about
    # $0.0192 for a call's 1,000 input tokens, $0.0212 with its output cap). The third call's
    # input fits under $0.07 even while the second is still held ($0.02 + 0.0212 + 0.0192);
    # the fourth's does not, counted or not ($0.06 + 0.0192, or $0.04 + 0.0212 + 0.0192).
    limits = RelayLimits(max_output_tokens=100, max_cost_usd=0.07)
    with FakeProvider(lambda r: Reply(text="hi", cost=0.02)) as p:
        relay = relays(p, limits=limits)
        statuses = [send(relay, "openai-compatible", body_for("chat"))[0] for _ in range(4)]
        usage = recorded_usage(relay, fake_provider_entry(p.base_url))
    assert statuses == [200, 200, 200, 400]
    assert usage.cost_usd == pytest.approx(0.06) and usage.cost_source == "provider"


@pytest.mark.parametrize("gap_s", [0.0, 0.01])  # an answer of known length; a chunked stream
def test_a_call_is_counted_before_its_answer_reaches_the_controller_whole(
    relays: RelayFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gap_s: float
) -> None:
    """A scaffold that reads an answer and exits, and a teardown that reads the counts at once,
    miss nothing, however late the counting runs (one CI run read $0.04 of $0.06 when the
    third call was counted after its client had it)."""
    settle = Spend.settle

    def slow_settle(self: Spend, *args: object, **kw: object) -> object:
        time.sleep(0.5)  # a busy host: the counting runs well after the answer's last byte
        return settle(self, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(Spend, "settle", slow_settle)
    with FakeProvider(lambda r: Reply(text="hi", cost=0.02, chunk_delay_s=gap_s)) as p:
        relay = relays(p, limits=RelayLimits(max_output_tokens=100, max_cost_usd=1.0))
        status, _ = send(relay, "openai-compatible", body_for("chat"))
        # read at once, the relay still open: the counters, the budget, the log
        calls, cost, tokens = relay.totals.calls, relay.spend.cost_usd, relay.spend.tokens
        logged = [e for e in log_entries(tmp_path, "call") if e["outcome"] == "answered"]
        usage = recorded_usage(relay, fake_provider_entry(p.base_url))
    assert status == 200 and calls == 1 and len(logged) == 1
    assert cost == pytest.approx(0.02) and tokens == PER_CALL
    assert usage.model_calls == 1 and usage.cost_usd == pytest.approx(0.02)


@pytest.mark.parametrize(
    ("cap", "padding"),
    [(2000, ""), (100, "x" * 2000)],  # held: the output caps; then the inputs (one per byte)
)
def test_calls_sent_at_once_cannot_run_far_past_the_budget(
    relays: RelayFactory, cap: int, padding: str
) -> None:
    """Ten calls at once, near the end of the budget: the first goes alone (the provider's
    overhead is unknown until it answers), then each admitted call holds its output cap and its
    input until it is answered, so only as many go as the budget could still cover."""
    limits = RelayLimits(max_output_tokens=cap, max_tokens_total=3500 if padding == "" else 5000)
    with FakeProvider(lambda r: Reply(text="hi", delay_s=2.0)) as p:
        relay = relays(p, limits=limits)
        statuses: list[int] = []
        lock = threading.Lock()
        body = body_for("chat", user=padding)

        def one() -> None:
            status = send(relay, "openai-compatible", body)[0]
            with lock:
                statuses.append(status)

        threads = [threading.Thread(target=one) for _ in range(10)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    assert sorted(statuses) == [200, 200] + [400] * 8
    assert len(p.requests) == 2


def test_an_answer_without_usage_still_counts() -> None:
    spend = Spend(RelayLimits(max_tokens_total=1000))
    held, why = spend.admit(100)
    assert held is not None and why is None
    assert spend.settle(held, None, None, answered=True, bytes_moved=4000) is not None
    assert spend.tokens == 1000  # one token per 4 bytes moved
    assert spend.admit(100) == (None, spend.spent)
    hung_up = Spend(RelayLimits(max_tokens_total=10**6))
    held, _ = hung_up.admit(500, 4000)
    assert held is not None and held.tokens == 4500  # its input: one token per byte
    hung_up.settle(held, None, None, answered=True, bytes_moved=4400, cut_short=True)
    assert hung_up.tokens == 1100 + 500  # the provider may have written its whole output
    failed = Spend(RelayLimits(max_tokens_total=1000))
    held, _ = failed.admit(100)
    assert held is not None
    assert failed.settle(held, None, None, answered=False, bytes_moved=4000) is None
    assert failed.tokens == 0  # a call that failed at the provider is not billed
    held, _ = failed.admit(100)
    assert held is not None
    failed.settle(
        held, Tokens(input=10, output=5, reasoning=3, cache_read=7, cache_write=2), None, True, 0
    )
    assert failed.tokens == 27  # every part the provider counts


# -- where the limits come from ------------------------------------------------------------------


def _track(**extra: object) -> Track:
    fields: dict[str, object] = {
        "id": "t",
        "title": "T",
        "benchmark_version": "1.0",
        "exam_sha256": "0" * 64,
        "exam_questions": 100,
        "budget_s": 3600,
        "per_call_limit_s": 600,
        "reserved_s": 60,
        "size_limit_bytes": 16 * 2**20,
        "hardware": "cpu",
    }
    fields.update(extra)
    return Track.model_validate(fields)


def test_the_limits_are_the_tracks_unless_the_run_sets_its_own(tmp_path: Path) -> None:
    track = _track()
    assert limits_for(track) == RelayLimits(32_000, 100_000_000, 250.0)
    own = _track(max_output_tokens=8000, max_tokens_total=None, max_cost_usd=None)
    assert limits_for(own) == RelayLimits(8000, None, None)
    assert limits_for(own, 5_000_000, 12.5) == RelayLimits(8000, 5_000_000, 12.5)
    campaign = CampaignFile.model_validate(
        {
            "track": "t",
            "agent": "opencode",
            "models": [{"name": "m", "provider": "openai"}],
            "max_tokens_total": 1_000_000,
            "max_cost_usd": 3.0,
        }
    )
    job = make_job(campaign, track, RunKey("t", "m", None, 0), attempt=1, results_dir=tmp_path)
    assert limits_for(job.track, job.max_tokens_total, job.max_cost_usd) == RelayLimits(
        32_000, 1_000_000, 3.0
    )


def test_toolkit_run_takes_the_budget_flags() -> None:
    from click.testing import CliRunner

    from toolkit.cli import cli

    # Through `cli`, as a user calls it: click keeps the help option a command first made,
    # and one made for `run` invoked alone would know "--help" only, not the group's "-h".
    shown = CliRunner().invoke(cli, ["run", "--help"]).output
    assert "--max-tokens-total" in shown and "--max-cost-usd" in shown
    refused = CliRunner().invoke(cli, ["run", "--seed", "0", "--max-tokens-total", "0"])
    assert refused.exit_code == 2 and "max-tokens-total" in refused.output
