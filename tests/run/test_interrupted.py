"""A run stopped from outside, at any step, is recorded at once as `invalid`, `interrupted`,
with what stopped it and what it was doing (issue: a run stopped during the final grading left
no result until a later `runs recover`)."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from tests.run.conftest import ShellAgent, SpecFactory
from toolkit.results.model import load_run
from toolkit.run.interrupt import Interrupted
from toolkit.run.orchestrate import execute_run

# Loads for a long time: the final grading is still going when the signal comes.
SLOW_BUNDLE = """mkdir -p bundles/slow
cat > bundles/slow/inference.py <<'PYEOF'
import time

class Model:
    def generate(self, prompts, lengths):
        return [b" " * n for n in lengths]

def load(bundle_dir, device):
    time.sleep(float(open(bundle_dir + "/delay").read()))
    return Model()
PYEOF
echo 0 > bundles/slow/delay
runner submit bundles/slow
echo 60 > bundles/slow/delay
runner submit bundles/slow
runner promote c002
"""


def _on_sigterm(signum: int, _frame: object) -> None:
    raise Interrupted(signal.Signals(signum).name, 128 + signum)


def test_a_run_stopped_during_its_final_grading_is_recorded_at_once(
    make_spec: SpecFactory,
) -> None:
    # A short per-call limit: c002's public scoring (at its submit) loads just as slowly, and
    # is cut at that limit (at 30 s it held the test 40 s before the final grading began).
    spec = make_spec(ShellAgent(SLOW_BUNDLE), budget=60, per_call=6, reserved=5)
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    fired: list[str] = []

    def echo(line: str) -> None:
        if "grading c002 on the exam" in line and not fired:
            fired.append(line)  # the signal comes while the bundle is loading
            threading.Timer(2.0, os.kill, (os.getpid(), signal.SIGTERM)).start()

    try:
        with pytest.raises(Interrupted):
            execute_run(spec, echo=echo)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert fired, "the run never reached its final grading"
    (path,) = (spec.results_dir / "demo-cpu-3").glob("*.json")
    result = load_run(path)
    assert result.status == "invalid"
    assert result.interrupted
    reason = result.status_reason or ""
    assert reason.startswith(
        "the run was interrupted during the final grading of c002 (SIGTERM)"
    ), reason
    assert result.promoted is not None and result.promoted.id == "c002"
    log = (path.parent / result.run_id / "agent.log").read_text()
    assert "result: invalid" in log


def test_an_interruption_during_the_session_says_by_what(make_spec: SpecFactory) -> None:
    spec = make_spec(ShellAgent("echo STOP-ME\nsleep 50\n"), budget=60, per_call=30, reserved=5)

    def driver_died(signum: int, _frame: object) -> None:  # as a campaign's run process does
        raise Interrupted("its campaign driver died", 128 + signum)

    def echo(line: str) -> None:
        if line == "STOP-ME":
            os.kill(os.getpid(), signal.SIGTERM)

    previous = signal.signal(signal.SIGTERM, driver_died)
    try:
        with pytest.raises(Interrupted):
            execute_run(spec, echo=echo)
    finally:
        signal.signal(signal.SIGTERM, previous)
    (path,) = (spec.results_dir / "demo-cpu-3").glob("*.json")
    result = load_run(path)
    assert result.status == "invalid" and result.interrupted
    assert result.evidence is not None and result.evidence.check == "interrupted"
    assert result.status_reason is not None
    assert result.status_reason.startswith(
        "the run was interrupted during the agent's session (its campaign driver died)"
    ), result.status_reason


def test_a_closed_output_is_named_when_it_stops_a_run(make_spec: SpecFactory) -> None:
    # As rich stops a program whose reader went away (`toolkit run ... | head -5`): the run
    # command's consoles no longer do (tests/cli/test_closed_output.py), but should anything
    # else, the result says what happened instead of "(SystemExit)".
    spec = make_spec(ShellAgent("echo STOP-ME\nsleep 50\n"), budget=60, per_call=30, reserved=5)

    def echo(line: str) -> None:
        if "agent 'test-shell' started" in line:  # a harness line: printed by the main thread
            try:
                raise BrokenPipeError(32, "Broken pipe")
            except BrokenPipeError:
                raise SystemExit(1) from None

    with pytest.raises(SystemExit):
        execute_run(spec, echo=echo)
    (path,) = (spec.results_dir / "demo-cpu-3").glob("*.json")
    reason = load_run(path).status_reason or ""
    assert "its output was closed" in reason, reason
