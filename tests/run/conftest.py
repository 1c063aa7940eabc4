"""Fixtures for run tests: a private state dir, small inputs, and agents written as shell scripts.

Test agents are ordinary `Agent` adapters whose script is given by the test; they run in the
real controller sandbox against the real runner service, so what they attack is the real thing.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from toolkit.agents import Agent, AgentContext, AgentOutcome
from toolkit.run.inputs import DEMO_BANK, built_exam, prepare_data, public_set
from toolkit.run.orchestrate import RunSpec
from toolkit.run.workspace import STARTER_DIR, TASK_FILE
from toolkit.tracks import Track, get_track

REPO = Path(__file__).resolve().parents[2]

# A bundle that needs no training: it answers every question with spaces.
TRIVIAL_INFERENCE = """
class Model:
    def generate(self, prompts, lengths):
        return [b" " * n for n in lengths]


def load(bundle_dir, device):
    return Model()
"""

# Shell for a test agent: writes the trivial bundle into bundles/triv.
MAKE_BUNDLE = f"""mkdir -p bundles/triv
cat > bundles/triv/inference.py <<'PYEOF'
{TRIVIAL_INFERENCE}
PYEOF
"""


class ShellAgent(Agent):
    """A test agent: the given POSIX shell script, run in the controller."""

    name = "test-shell"
    version = "test"

    def __init__(self, script: str) -> None:
        self.script = "#!/bin/sh\n" + script

    def prepare(self, workspace: Path, ctx: AgentContext) -> None:
        path = ctx.bin_dir / "test-agent"
        path.write_text(self.script)
        path.chmod(0o755)

    def command(self) -> list[str]:
        return ["test-agent"]

    def config_sha256(self) -> str:
        return hashlib.sha256(self.script.encode()).hexdigest()

    def collect(self, workspace: Path, output: str) -> AgentOutcome:
        return AgentOutcome(transcript=output)


@pytest.fixture(autouse=True)
def ari_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("ARI_HOME", str(home))
    return home


@pytest.fixture
def demo_track() -> Track:
    return get_track(REPO / "results", "demo-cpu")


@pytest.fixture
def starter(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real starter; until its brief lands, a copy with a placeholder brief."""
    if (STARTER_DIR / TASK_FILE).is_file():
        return STARTER_DIR
    copy = tmp_path_factory.mktemp("starter") / "starter"
    shutil.copytree(STARTER_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / TASK_FILE).write_text("# Task (placeholder brief for tests)\n")
    return copy


@pytest.fixture
def small_text(tmp_path: Path) -> Path:
    words = ["the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "while"]
    words += ["seven", "wizards", "quietly", "box"]
    lines = [" ".join(words[(i * 7 + j) % len(words)] for j in range(12)) for i in range(4000)]
    path = tmp_path / "text.txt"
    path.write_text("\n".join(lines))
    return path


SpecFactory = Callable[..., RunSpec]


@pytest.fixture
def make_spec(tmp_path: Path, demo_track: Track, starter: Path, small_text: Path) -> SpecFactory:
    """A RunSpec on the demo track with scaled-down times and small training data."""

    def make(
        agent: Agent, *, budget: float, per_call: float, reserved: float, **kw: object
    ) -> RunSpec:
        data = prepare_data(small_text, tmp_path / "data")
        return RunSpec(
            track=demo_track,
            model="none",
            seed=0,
            agent=agent,
            exam=built_exam(DEMO_BANK, "demo"),
            public_set=public_set(),
            data_dir=data,
            results_dir=tmp_path / "results",
            budget_s=budget,
            per_call_limit_s=per_call,
            reserved_s=reserved,
            starter=starter,
            **kw,  # type: ignore[arg-type]
        )

    return make
