"""Fixtures for grading tests: bundles and exams written by each test into its own tmp folder."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from grading_helpers import (
    STARTER_BUDGET_S,
    STARTER_STEPS,
    MakeBundle,
    MakeExam,
    TrainedStarter,
)

from exam_builder.build import build_exam
from tests.exams import few_per_family
from toolkit.text.data import prepare_train_data
from toolkit.tracks.model import GradingParams

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def trained_starter(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TrainedStarter]:
    """The starter trained for STARTER_STEPS steps within a minute (tiny preset, CPU) from a
    workspace laid out like a run's, and three questions of each family of the demo exam (what
    its tests compare is per question: the whole exam's grading is tested end to end by
    tests/run/test_run.py). The path every run takes. Made once per test session: under
    pytest-xdist the first worker to ask trains it in the session's shared temporary folder and
    the others wait for it. Tests only read it."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    root = shared / "trained-starter"
    root.mkdir(exist_ok=True)
    with (root / "lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        made = root / "made.json"
        if not made.exists():
            workspace = root / "workspace"
            shutil.copytree(
                REPO / "toolkit" / "starter",
                workspace / "starter",
                ignore=shutil.ignore_patterns("TASK.md"),
            )
            prepare_train_data(None, workspace / "data")
            started = time.monotonic()
            done = subprocess.run(
                [sys.executable, "starter/train.py", "--data", "data", "--out", "bundles/b1",
                 "--budget-s", str(STARTER_BUDGET_S), "--max-steps", str(STARTER_STEPS),
                 "--device", "cpu", "--preset", "tiny"],
                cwd=workspace, capture_output=True, text=True, timeout=STARTER_BUDGET_S * 4,
            )  # fmt: skip
            wall = time.monotonic() - started
            assert done.returncode == 0, done.stdout + done.stderr
            assert "val bpb" in done.stdout
            build_exam(REPO / "exam_builder/banks/public/demo", root / "demo", english_text=None)
            (root / "few").mkdir()
            few_per_family(root / "demo/exam.jsonl", 3, root / "few/exam.jsonl")
            made.write_text(json.dumps({"wall_s": wall}))
        wall = json.loads(made.read_text())["wall_s"]
    yield TrainedStarter(root / "workspace/bundles/b1", root / "few/exam.jsonl", wall)


@pytest.fixture
def make_bundle(tmp_path: Path) -> MakeBundle:
    """`make_bundle(inference_source, name="bundle", files={...})` -> the bundle folder."""

    def make(source: str, name: str = "bundle", files: dict[str, bytes] | None = None) -> Path:
        bundle = tmp_path / name
        bundle.mkdir()
        (bundle / "inference.py").write_text(textwrap.dedent(source), encoding="utf-8")
        for rel, data in (files or {}).items():
            (bundle / rel).parent.mkdir(parents=True, exist_ok=True)
            (bundle / rel).write_bytes(data)
        return bundle

    return make


@pytest.fixture
def make_exam(tmp_path: Path) -> MakeExam:
    """`make_exam(questions)` writes a canonical exam.jsonl in its own folder and returns it."""

    def make(questions: list[dict[str, str]], name: str = "exam") -> Path:
        folder = tmp_path / name
        folder.mkdir()
        path = folder / "exam.jsonl"
        lines = [
            json.dumps(q, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n"
            for q in questions
        ]
        path.write_text("".join(lines), encoding="utf-8")
        return path

    return make


@pytest.fixture
def fast_params() -> GradingParams:
    """Small limits so that hangs end quickly."""
    return GradingParams(
        load_timeout_s=60,
        batch_timeout_s=30,
        total_timeout_s=120,
        batch_size=4,
        memory_bytes=4 * 2**30,
    )


@pytest.fixture(autouse=True)
def _state_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # tests/conftest.py points ARI_HOME at a session-wide temporary folder (the default corpus
    # is extracted there once); make sure of it even when this folder is run on its own.
    if not os.environ.get("ARI_HOME"):
        monkeypatch.setenv("ARI_HOME", str(tmp_path_factory.mktemp("ari-home")))


@pytest.fixture(params=["local", "docker"])
def grading_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a module's gradings on each backend: `grade_bundle`'s default backend is switched,
    so the tests themselves stay as they are (opt in with `usefixtures("grading_backend")`)."""
    from toolkit.grading import grade

    if request.param == "docker":
        request.getfixturevalue("docker_engine")  # a real engine, or skip (fail in CI)
    defaults = grade.grade_bundle.__kwdefaults__
    assert defaults is not None and "backend" in defaults
    monkeypatch.setitem(defaults, "backend", request.param)
    return str(request.param)
