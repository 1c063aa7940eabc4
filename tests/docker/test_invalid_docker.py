"""`invalid` only on evidence the sandboxed code cannot produce, on the docker backend.

The attacks of `tests/run/test_invalid_runs.py` on whole docker runs: a promoted bundle that
leaves a swarm of children slow to die in phase 2 (the teardown bound lowered to 2 s): the run
is not `invalid`. Two attacks read the same on both backends and run on both there (an agent's
runner call slow to die and cancelled, a fault injected in the harness).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docker.conftest import ShellAgent, SpecFactory
from tests.teardown_attack import PHASE2_BUNDLE
from toolkit.run import roles
from toolkit.run.orchestrate import execute_run
from toolkit.run.reference import runner_reference
from toolkit.sandbox import create_sandbox


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
