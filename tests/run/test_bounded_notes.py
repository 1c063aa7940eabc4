"""Harness text that quotes the agent is bounded: a line of `agent.log`, a `status_reason`.

An adapter's problem may quote what the provider said, and a provider may repeat what the agent
sent it: a megabyte of it must not become a megabyte in the result (or in every log line)."""

from __future__ import annotations

from tests.run.conftest import ShellAgent, SpecFactory
from toolkit.run.agent_log import LOG_LINE_CHARS, STATUS_REASON_CHARS, bounded
from toolkit.run.orchestrate import execute_run

QUOTED = "provider said: " + "A" * 1_000_000 + " (the end)"


class QuotingAgent(ShellAgent):
    """A test agent whose adapter reports a provider problem quoting a megabyte of text."""

    def final_problem(self, exited: bool) -> str | None:
        return QUOTED


def test_a_problem_quoting_a_megabyte_is_bounded_in_the_result_and_log(
    make_spec: SpecFactory,
) -> None:
    spec = make_spec(QuotingAgent("echo hi\n"), budget=30, per_call=10, reserved=5)
    result = execute_run(spec)
    assert result.status == "invalid"
    reason = result.status_reason or ""
    assert len(reason) <= STATUS_REASON_CHARS
    assert reason.startswith("provider said: AAA") and reason.endswith("(the end)")
    assert "characters cut" in reason
    log = (spec.results_dir / spec.track.id / result.run_id / "agent.log").read_text()
    assert all(len(line) <= LOG_LINE_CHARS + 20 for line in log.splitlines())
    assert "characters cut" in log


def test_bounded_keeps_short_text_and_both_ends_of_long_text() -> None:
    assert bounded("short", 100) == "short"
    cut = bounded("a" * 500 + "b" * 500, 200)
    assert len(cut) <= 200 and cut.startswith("a" * 80) and cut.endswith("b" * 80)
    assert "840 characters cut" in cut
