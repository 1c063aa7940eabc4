"""`invalid` only on evidence the sandboxed code cannot produce, on the docker backend.

The attacks of `tests/run/test_invalid_runs.py` on whole docker runs: a promoted bundle that
leaves a swarm of children slow to die in phase 2 (the teardown bound lowered to 2 s), an
agent's runner call that does the same and is cancelled; neither run is `invalid`. A fault
injected in the harness (no grading sandbox can start) fails the reference too: `invalid`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.docker.conftest import ShellAgent, SpecFactory
from tests.run.conftest import MAKE_BUNDLE
from tests.teardown_attack import PHASE2_BUNDLE, RUNNER_SCRIPT
from toolkit.results.chain import read_chain
from toolkit.run import roles
from toolkit.run.artifacts import AGENT_LOG, AUDIT_FILE
from toolkit.run.orchestrate import execute_run
from toolkit.run.reference import runner_reference
from toolkit.runner.service import KILLED
from toolkit.sandbox import SandboxError, create_sandbox


def test_promoted_bundle_slow_to_die_in_phase2_is_not_invalid(
    make_spec: SpecFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARI_TEARDOWN_WAIT_S", "2")
    agent = ShellAgent(
        "mkdir -p bundles/b\n"
        f"cat > bundles/b/inference.py <<'PYEOF'\n{PHASE2_BUNDLE}\nPYEOF\n"
        "runner submit bundles/b\nrunner promote c001\n"
    )
    result = execute_run(make_spec(agent, budget=150, per_call=90, reserved=10))
    assert result.status in ("valid", "failed"), result.status_reason
    assert result.bits_per_byte is None  # phase 2 is the bundle's failure
    assert "reroll" not in (result.status_reason or "")


def test_cancelled_runner_call_slow_to_die_is_not_invalid(make_spec: SpecFactory) -> None:
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
    # Cancelled (killed), or killed by the runner container's own limits first (its memory
    # cap counts the kernel's bookkeeping of the mappings): the call's doing either way.
    assert len(swarm) == 1 and swarm[0]["exit_code"] in (KILLED, -9), swarm
    print(f"\nthe swarm call: exit {swarm[0]['exit_code']}, note {swarm[0].get('note')!r}")


def test_a_harness_fault_that_fails_the_reference_too_is_invalid(
    make_spec: SpecFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_args: object, **_kwargs: object) -> None:
        raise SandboxError("injected: the grading sandbox cannot start")

    monkeypatch.setattr("toolkit.grading.phases.create_sandbox", broken)
    agent = ShellAgent(MAKE_BUNDLE + "runner submit bundles/triv\nrunner promote c001\n")
    spec = make_spec(agent, budget=90, per_call=60, reserved=5)
    result = execute_run(spec)
    assert result.status == "invalid", result.status_reason
    log = (spec.results_dir / result.track / result.run_id / AGENT_LOG).read_text()
    assert "the reference bundle failed too" in log


def test_the_runner_reference_works_in_a_fresh_docker_runner(tmp_path: Path) -> None:
    """The check that decides a broken call's fate must itself pass where nothing is broken."""
    problem = runner_reference(
        lambda root: roles.make_runner("docker", root, hide=[], readonly=[]), tmp_path / "ref"
    )
    assert problem is None
    assert not (tmp_path / "ref").exists()


def test_a_kill_right_after_start_is_not_lost(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PID 1 kills only a command it can find; one killed at once (a call cancelled as it
    starts) used to miss it, and the kill waited out its bound: then "survived its kill", an
    infrastructure failure. The request is repeated until the command is gone."""
    monkeypatch.setenv("ARI_TEARDOWN_WAIT_S", "30")
    with create_sandbox("docker", root=root) as box:
        for _ in range(5):
            process = box.start(["sleep", "600"], stdin=False, stdout=False, stderr=False)
            process.kill()
            assert process.wait(timeout=5) is not None
