"""The shell pieces parse: the agent's `runner` client, the scripted agent, `make demo`."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from toolkit.agents import AgentContext, ScriptedAgent
from toolkit.runner.client import client_script

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("shell", ["sh", "bash"])
def test_runner_client_is_posix_shell(shell: str, tmp_path: Path) -> None:
    path = tmp_path / "runner"
    path.write_text(client_script(Path("/some where/with 'quotes'/.runner")))
    assert subprocess.run([shell, "-n", str(path)]).returncode == 0


def test_runner_client_says_when_the_harness_is_gone(tmp_path: Path) -> None:
    path = tmp_path / "runner"
    path.write_text(client_script(tmp_path / "no-channel"))
    done = subprocess.run(["sh", str(path), "true"], capture_output=True, text=True, timeout=10)
    assert done.returncode == 125
    assert "the harness is not listening" in done.stderr


def test_scripted_agent_is_posix_shell(tmp_path: Path) -> None:
    agent = ScriptedAgent()
    ctx = AgentContext(
        model="none",
        effort=None,
        seed=3,
        budget_s=300,
        reserved_s=30,
        per_call_limit_s=180,
        bin_dir=tmp_path,
    )
    agent.prepare(tmp_path, ctx)
    script = tmp_path / agent.command()[0]
    assert subprocess.run(["sh", "-n", str(script)]).returncode == 0
    assert '--seed "$SEED"' in script.read_text() and "SEED=3" in script.read_text()


def test_demo_script_parses() -> None:
    assert subprocess.run(["bash", "-n", str(REPO / "scripts" / "demo.sh")]).returncode == 0


def test_scripted_agent_passes_a_step_limit_to_the_training_only_when_given(
    tmp_path: Path,
) -> None:
    ctx = AgentContext(
        model="none",
        effort=None,
        seed=0,
        budget_s=300,
        reserved_s=30,
        per_call_limit_s=180,
        bin_dir=tmp_path,
    )
    plain, limited = ScriptedAgent().render(ctx), ScriptedAgent(max_steps=7).render(ctx)
    assert "--max-steps" not in plain and "__STEPS__" not in plain
    assert '--seed "$SEED" --max-steps 7 ||' in limited
    assert plain == limited.replace(" --max-steps 7", "")
    with pytest.raises(ValueError, match="max_steps"):
        ScriptedAgent(max_steps=0)
