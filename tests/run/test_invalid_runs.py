"""`invalid` only on evidence the sandboxed code cannot produce (whole runs, local backend).

Attacks (`tests/teardown_attack.py`: a swarm of children whose teardown after SIGKILL takes
several seconds): a promoted bundle that starts it in phase 2, and an agent's runner call that
starts it and is then cancelled. Either used to end the run `invalid` (a free rerun); now the
harness waits for the teardown, or, past its bound, checks a known-good reference in a fresh
sandbox, and charges the failure to the bundle or the call. A real harness fault (injected in
the harness, not the bundle) makes the reference fail too: that run is still `invalid`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.run.conftest import MAKE_BUNDLE, ShellAgent, SpecFactory, spec_factory
from tests.teardown_attack import PHASE2_BUNDLE, RUNNER_SCRIPT
from toolkit.agents.scripted import BASELINE_MODEL
from toolkit.images import pin
from toolkit.results.chain import read_chain
from toolkit.run.artifacts import AGENT_LOG, AUDIT_FILE
from toolkit.run.orchestrate import execute_run
from toolkit.run.workspace import CHANNEL_DIR
from toolkit.runner.service import KILLED
from toolkit.sandbox import SandboxError, SandboxTeardownTimeout
from toolkit.sandbox.local import LocalSandbox
from toolkit.sandbox.local.process import LocalProcess


def _submit_and_promote(source: str) -> ShellAgent:
    return ShellAgent(
        "mkdir -p bundles/b\n"
        f"cat > bundles/b/inference.py <<'PYEOF'\n{source}\nPYEOF\n"
        "runner submit bundles/b\nrunner promote c001\n"
    )


def _agent_log(spec_results: Path, run_id: str, track: str) -> str:
    return (spec_results / track / run_id / AGENT_LOG).read_text()


def test_promoted_bundle_slow_to_die_in_phase2_fails_the_run(
    make_spec: SpecFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the teardown bound (lowered here to 2 s: the swarm takes ~10 s) the grading raises;
    the reference bundle grades fine, so the run is `failed` with a fixed reason, not voided."""
    monkeypatch.setenv("ARI_TEARDOWN_WAIT_S", "2")  # base.TEARDOWN_ENV
    spec = make_spec(_submit_and_promote(PHASE2_BUNDLE), budget=120, per_call=60, reserved=10)
    started = time.monotonic()
    result = execute_run(spec)
    print(f"\nrun took {time.monotonic() - started:.1f} s")
    assert result.status == "failed", result.status_reason
    reason = result.status_reason or ""
    assert reason.startswith("grading failed: the bundle's sandbox could not be torn down")
    assert "reroll" not in reason  # nothing of the bundle's own text
    assert result.promoted is not None and result.promoted.id == "c001"
    log = _agent_log(spec.results_dir, result.run_id, result.track)
    assert "the reference bundle graded fine" in log


@pytest.fixture(params=["local", "docker"])
def backend_spec(
    request: pytest.FixtureRequest, tmp_path: Path, starter: Path, small_text: Path
) -> Iterator[tuple[str, SpecFactory]]:
    """The backend and its RunSpec factory, for the attacks that read the same on both: the
    docker one needs the engine (tests/conftest.py puts these tests in the docker group)."""
    if request.param == "local":
        yield "local", spec_factory(tmp_path, small_text, starter=starter)
        return
    request.getfixturevalue("docker_engine")
    yield "docker", spec_factory(tmp_path, small_text, backend="docker", model=BASELINE_MODEL)
    pin(None)  # a run in-process pinned its images: the next test starts afresh


def test_cancelled_runner_call_slow_to_die_is_charged_to_the_call(
    backend_spec: tuple[str, SpecFactory],
) -> None:
    """The agent's call leaves the swarm and is cancelled (SIGTERM to its client): the service
    waits for the teardown (default bound), records the call as killed, and the run goes on."""
    backend, make_spec = backend_spec
    script = f"""cat > swarm.py <<'PYEOF'
{RUNNER_SCRIPT}
PYEOF
runner python3 swarm.py > swarm.out 2>&1 &
pid=$!
i=0
while ! grep -q "swarm ready" swarm.out && [ $i -lt 900 ]; do sleep 0.1; i=$((i+1)); done
kill -TERM $pid
wait $pid
{MAKE_BUNDLE}
runner submit bundles/triv
runner promote c001
"""
    spec = make_spec(ShellAgent(script), budget=150, per_call=100, reserved=10)
    result = execute_run(spec)
    assert result.status == "valid", result.status_reason
    audit = read_chain(spec.results_dir / result.track / result.run_id / AUDIT_FILE)
    swarm = [e for e in audit if e.get("argv") and "swarm.py" in json.dumps(e["argv"])]
    # On docker the runner container's own limits may kill it first (its memory cap counts the
    # kernel's bookkeeping of the mappings): the call's doing either way.
    killed = (KILLED,) if backend == "local" else (KILLED, -9)
    assert len(swarm) == 1 and swarm[0]["exit_code"] in killed, swarm
    print(f"\nthe cancelled call lasted {swarm[0]['end_s'] - swarm[0]['start_s']:.1f} s in all")


def test_a_harness_fault_that_fails_the_reference_too_is_invalid(
    backend_spec: tuple[str, SpecFactory], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fault injected in the harness: no grading sandbox can be made. The promoted (honest)
    bundle's grading raises, and so does the reference bundle's: the run is `invalid`."""

    def broken(*_args: object, **_kwargs: object) -> None:
        raise SandboxError("injected: the grading sandbox cannot start")

    monkeypatch.setattr("toolkit.grading.phases.create_sandbox", broken)
    _, make_spec = backend_spec
    spec = make_spec(
        ShellAgent(MAKE_BUNDLE + "runner submit bundles/triv\nrunner promote c001\n"),
        budget=90,
        per_call=60,
        reserved=5,
    )
    result = execute_run(spec)
    assert result.status == "invalid", result.status_reason
    assert "grading failed (infrastructure)" in (result.status_reason or "")
    assert result.evidence is not None and result.evidence.check == "grading-reference"
    log = _agent_log(spec.results_dir, result.run_id, result.track)
    assert "the reference bundle failed too" in log


def _failing_first_cleanup(monkeypatch: pytest.MonkeyPatch) -> None:
    """The controller's cleanup at the run's end reports a tree that outlived its kill, as an
    agent's processes too slow to die do (after really cleaning up)."""
    cleanup = LocalSandbox.cleanup
    failed: list[bool] = []

    def slow(self: LocalSandbox) -> None:
        cleanup(self)
        controller = f"/{CHANNEL_DIR}/" in self.base_env.get("PATH", "")  # the agent's tools
        if controller and not failed:
            failed.append(True)
            raise SandboxTeardownTimeout("injected: the agent's tree outlived its kill")

    monkeypatch.setattr(LocalSandbox, "cleanup", slow)


def test_a_teardown_the_agent_slowed_is_charged_to_it(
    make_spec: SpecFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    _failing_first_cleanup(monkeypatch)
    agent = ShellAgent(MAKE_BUNDLE + "runner submit bundles/triv\nrunner promote c001\n")
    spec = make_spec(agent, budget=60, per_call=30, reserved=5)
    result = execute_run(spec)
    assert result.status == "valid", result.status_reason
    log = _agent_log(spec.results_dir, result.run_id, result.track)
    assert "teardown failed" in log and "charged to the agent" in log


def test_a_teardown_failure_the_reference_confirms_is_invalid(
    make_spec: SpecFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fault injected in the harness: every kill of the sandbox layer reports a failure (after
    really killing), the reference's too."""
    _failing_first_cleanup(monkeypatch)
    kill = LocalProcess.kill

    def broken(self: LocalProcess) -> None:
        kill(self)
        raise SandboxError("injected: kills fail in every sandbox")

    monkeypatch.setattr(LocalProcess, "kill", broken)
    agent = ShellAgent(MAKE_BUNDLE + "runner submit bundles/triv\nrunner promote c001\n")
    result = execute_run(make_spec(agent, budget=60, per_call=30, reserved=5))
    assert result.status == "invalid", result.status_reason
    assert (result.status_reason or "").startswith("teardown failed")
    assert result.evidence is not None and result.evidence.check == "runner-reference"
