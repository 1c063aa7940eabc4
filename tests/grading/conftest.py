"""Fixtures for grading tests: bundles and exams written by each test into its own tmp folder."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest
from grading_helpers import MakeBundle, MakeExam

from toolkit.tracks.model import GradingParams


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
