"""Fixtures for grading tests: bundles and exams written by each test into its own tmp folder."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from toolkit.tracks import GradingParams

MakeBundle = Callable[..., Path]
MakeExam = Callable[..., Path]

# An honest bundle that solves "The code is XYZ. ... the code is " prompts by rule.
ORACLE = """
    import re

    class Oracle:
        def generate(self, prompts, lengths):
            out = []
            for prompt, n in zip(prompts, lengths):
                found = re.findall(rb"code is (\\w+)", prompt)
                out.append((found[0] if found else b"?")[:n].ljust(n, b"?"))
            return out

        def next_byte_logprobs(self, contexts):
            import numpy as np
            return np.full((len(contexts), 256), -np.log(256.0), dtype=np.float32)

    def load(bundle_dir, device):
        return Oracle()
"""


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


def code_questions(count: int, family: str = "extraction") -> list[dict[str, str]]:
    """Questions whose answer is a code stated earlier in the prompt (the oracle solves them)."""
    return [
        {
            "id": f"{family}-{i}",
            "family": family,
            "prompt": f"Memo {i}. The code is K{i}Q{i * 7}Z. Later, asked again, the code is ",
            "answer": f"K{i}Q{i * 7}Z",
        }
        for i in range(count)
    ]


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
