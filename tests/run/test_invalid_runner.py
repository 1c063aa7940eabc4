"""The runner service charges a call whose sandbox breaks to the call, unless the harness's own
reference command fails too in a fresh sandbox (then, and only then, an infrastructure error).

Real service, client and local sandboxes; the faults are injected in the harness: the call's
process handle reports a failed kill (as a tree too slow to die does), and for the real
infrastructure failure every kill of the sandbox layer does, the reference's included.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.run.runner_env import Env, make_env
from toolkit.clock import Clock
from toolkit.run.reference import runner_reference
from toolkit.runner.service import INTERNAL, KILLED
from toolkit.sandbox import SandboxError, SandboxProcess, SandboxTeardownTimeout, create_sandbox
from toolkit.sandbox.local.process import LocalProcess


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    yield from make_env(
        tmp_path, Clock(budget_s=600, reserved_s=60, per_call_limit_s=2), submissions=False
    )


def _with_reference(env: Env, tmp_path: Path) -> None:
    env.service.reference = lambda: runner_reference(
        lambda root: create_sandbox("local", root=root),
        tmp_path / f"reference-{secrets.token_hex(4)}",
    )


def _breaking_kills(env: Env) -> None:
    """Each call's process reports its kill as failed (after really killing it), once."""

    def start(argv: list[str]) -> SandboxProcess:
        process = env.box.start(argv, stdin=False)
        failed: list[bool] = []

        def broken_kill() -> None:
            first = not failed  # once: the sandbox's own cleanup later goes through
            failed.append(True)
            type(process).kill(process)  # as the class has it now (a test may patch it)
            if first:
                raise SandboxTeardownTimeout("injected: the call's tree outlived its kill")

        process.kill = broken_kill  # type: ignore[method-assign]
        return process

    env.service.start_process = start


def test_call_whose_kill_fails_is_charged_when_the_reference_works(
    env: Env, tmp_path: Path
) -> None:
    _with_reference(env, tmp_path)
    _breaking_kills(env)
    done = env.call("sh", "-c", "sleep 60", timeout=60)
    assert done.returncode == KILLED, done.stderr
    assert "charged to the call" in done.stderr
    assert env.service.infra_errors == []
    entry = env.entries()[-1]
    assert entry["exit_code"] == KILLED and "charged to the call" in entry["note"]
    assert "injected" not in entry["note"]  # a fixed text, not the failure's own


def test_call_whose_kill_fails_with_the_reference_is_an_infra_error(
    env: Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _with_reference(env, tmp_path)
    _breaking_kills(env)
    kill = LocalProcess.kill

    def harness_fault(self: LocalProcess) -> None:  # the sandbox layer itself is broken
        kill(self)
        raise SandboxError("injected: kills fail in every sandbox")

    monkeypatch.setattr(LocalProcess, "kill", harness_fault)
    done = env.call("sh", "-c", "sleep 60", timeout=120)
    assert done.returncode == INTERNAL, done.stderr
    assert len(env.service.infra_errors) == 1
    assert "reference check failed" in env.service.infra_errors[0]
    monkeypatch.undo()  # the fixture's own teardown kills for real
