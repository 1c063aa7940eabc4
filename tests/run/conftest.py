"""Fixtures for run tests: a private state dir, small inputs, and agents written as shell scripts.

Test agents are ordinary `Agent` adapters whose script is given by the test; they run in the
real controller sandbox against the real runner service, so what they attack is the real thing.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from exam_builder.exam_file import load_exam
from toolkit.agents import Agent, AgentContext, AgentOutcome
from toolkit.run.inputs import DEMO_BANK, built_exam, prepare_data, public_set
from toolkit.run.spec import RunSpec
from toolkit.run.workspace import STARTER_DIR, TASK_FILE
from toolkit.tracks.model import Track, get_track

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
    return get_track(REPO / "results", "demo-cpu-3")


@pytest.fixture
def starter(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real starter; until its brief lands, a copy with a placeholder brief."""
    if (STARTER_DIR / TASK_FILE).is_file():
        return STARTER_DIR
    copy = tmp_path_factory.mktemp("starter") / "starter"
    shutil.copytree(STARTER_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / TASK_FILE).write_text("# Task (placeholder brief for tests)\n")
    return copy


def write_small_text(folder: Path) -> Path:
    """A small training text (a few repeated words) in `folder`."""
    words = ["the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "while"]
    words += ["seven", "wizards", "quietly", "box"]
    lines = [" ".join(words[(i * 7 + j) % len(words)] for j in range(12)) for i in range(4000)]
    path = folder / "text.txt"
    path.write_text("\n".join(lines))
    return path


@pytest.fixture
def small_text(tmp_path: Path) -> Path:
    return write_small_text(tmp_path)


SpecFactory = Callable[..., RunSpec]


def spec_factory(folder: Path, text: Path, **defaults: object) -> SpecFactory:
    """`make(agent, budget=, per_call=, reserved=, **kw)`: RunSpecs on the demo track with
    scaled-down times, training data prepared from `text` into `folder`; `defaults` (a backend,
    a model, a starter) apply to every spec, `kw` to one. Shared by the local (here) and docker
    (tests/docker) fixtures, which differ only in their defaults."""

    def make(
        agent: Agent,
        *,
        budget: float,
        per_call: float,
        reserved: float,
        exam: Path | None = None,
        results_dir: Path | None = None,
        **kw: object,
    ) -> RunSpec:
        data = prepare_data(text, folder / "data")
        options = {"model": "none", **defaults, **kw}
        return RunSpec(
            track=get_track(REPO / "results", "demo-cpu-3"),
            seed=0,
            agent=agent,
            exam=exam or built_exam(DEMO_BANK, "demo"),
            public_set=public_set(),
            data_dir=data,
            results_dir=results_dir or folder / "results",
            budget_s=budget,
            per_call_limit_s=per_call,
            reserved_s=reserved,
            **options,  # type: ignore[arg-type]
        )

    return make


@pytest.fixture
def make_spec(tmp_path: Path, starter: Path, small_text: Path) -> SpecFactory:
    """A RunSpec on the demo track with scaled-down times and small training data."""
    return spec_factory(tmp_path, small_text, starter=starter)


def exam_marks(exam: Path, count: int = 10) -> list[bytes]:
    """Byte strings that only a copy of the exam holds, whole or in part: per question, its
    answer with the text just before it (as a program that read the exam would print it), and
    the end of its prompt as the file has it (JSON-escaped; the answer is a field of its own
    there). Every second mark is one of the file's."""
    questions = load_exam(exam)
    step = max(1, len(questions) // count)
    marks: list[bytes] = []
    for q in questions[::step][:count]:
        marks.append((q.prompt[-40:] + q.answer).encode())
        marks.append(json.dumps(q.prompt[-60:], ensure_ascii=False)[1:-1].encode())
    return marks


@dataclass(frozen=True)
class Exposed:
    """Where an operator might keep things, readable by every user: state, results, an exam."""

    root: Path
    home: Path
    results: Path
    exam: Path


@pytest.fixture
def exposed(monkeypatch: pytest.MonkeyPatch) -> Iterator[Exposed]:
    """A world-readable folder outside /tmp (which every sandbox sees as its own, so that a
    test under pytest's tmp folder proves nothing), holding `$ARI_HOME`, the results and a copy
    of the demo exam, as an operator's machine would (`/srv/...`). Removed afterwards."""
    base = next((Path(p) for p in ("/srv", REPO.parent) if os.access(p, os.W_OK)), None)
    if base is None:
        message = "no world-readable writable folder outside /tmp (/srv or the repo's parent)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    root = Path(tempfile.mkdtemp(prefix="ari-test-", dir=base))
    try:
        root.chmod(0o755)
        home = root / "home"
        monkeypatch.setenv("ARI_HOME", str(home))
        exam = root / "exams" / "exam.jsonl"
        exam.parent.mkdir(mode=0o755)
        shutil.copy(built_exam(DEMO_BANK, "demo"), exam)
        exam.chmod(0o644)
        (root / "results").mkdir(mode=0o755)
        yield Exposed(root=root, home=home, results=root / "results", exam=exam)
    finally:
        shutil.rmtree(root, ignore_errors=True)
