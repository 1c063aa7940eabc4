"""The learner is an instrument: a budget in steps trains the same model, and passes the same
questions, on an idle box and on a loaded one; a cap in seconds that cuts a family short says
so in the row, the table and its verdict, and the gate does not judge such a table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from exam_builder.bank import load_bank
from exam_builder.build import build_exam
from exam_builder.exam_file import load_exam
from exam_builder.learnability import learn_problems, verdict
from toolkit.cli import cli
from toolkit.learn.corpus import Corpus
from toolkit.learn.reference import learn_family
from toolkit.learn.scale import CPU, Scale, Shape
from toolkit.learn.trainer import train_family

BANK = Path(__file__).parent / "bank"
TINY = Scale(
    name="cpu",
    device="cpu",
    shape=Shape(n_layer=1, n_head=1, d_model=32, block_size=256),
    batch_size=4,
    lr=1e-3,
    reask=1.0,
    steps=12,
)
HOG_SECONDS = 120
"""The longest a CPU hog of these tests may run (it is stopped as soon as the test ends)."""


@contextmanager
def cpu_hog() -> Iterator[None]:
    """One spinning process per core, each ending by itself after `HOG_SECONDS`."""
    code = (
        f"import time\nend = time.monotonic() + {HOG_SECONDS}\nwhile time.monotonic() < end: pass"
    )
    hogs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(os.cpu_count() or 2)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


@pytest.fixture(scope="module")
def exam(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("budget-exam") / "exam"
    build_exam(BANK, out, english_text=None)
    return out


def test_a_step_budget_trains_the_same_model_idle_and_under_a_cpu_hog(tmp_path: Path) -> None:
    bank = load_bank(BANK)
    entry = next(e for e in bank.families if e.family.name == "constant")

    def weights(name: str) -> tuple[int, float, bytes]:
        corpus = Corpus(bank, entry, reask=1.0)
        trained = train_family(corpus, TINY, tmp_path / name, steps=TINY.steps, seed=4)
        assert not trained.cut
        return trained.steps, trained.final_loss, (tmp_path / name / "weights.pt").read_bytes()

    idle = weights("idle")
    with cpu_hog():
        loaded = weights("loaded")
    assert idle[0] == loaded[0] == TINY.steps
    assert idle[1] == loaded[1]
    assert idle[2] == loaded[2], "the same steps and seed made other weights under load"


def test_the_same_steps_give_the_same_rows_idle_and_under_a_cpu_hog(exam: Path) -> None:
    """The whole family, graded by the real grader: every figure but the seconds is the same."""
    bank = load_bank(BANK)
    questions = load_exam(exam / "exam.jsonl")

    def rows() -> list[dict[str, object]]:
        found = learn_family(bank, "constant", questions, TINY, steps=TINY.steps, seed=1)
        return [r.model_dump(exclude={"seconds"}) for r in found]

    idle = rows()
    with cpu_hog():
        loaded = rows()
    assert idle == loaded
    assert idle[0]["steps"] == idle[0]["budget_steps"] == TINY.steps


def test_a_cap_that_cuts_a_family_short_is_said_and_not_judged(exam: Path, tmp_path: Path) -> None:
    out = tmp_path / "learn.json"
    args = ["--bank", str(BANK), "--exam", str(exam), "--families", "constant"]
    result = CliRunner().invoke(
        cli, ["learn-exam", *args, "--steps", "100000", "--seconds", "1", "--json", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "(cut)" in result.output and "cut short by the cap" in result.output
    assert "verdict: too few steps to judge" in result.output
    report = json.loads(out.read_text())
    assert report["steps_per_family"] == 100000 and report["seconds_per_family"] == 1
    row = report["rows"][0]
    assert row["cut"] is True and row["steps"] < row["budget_steps"] == 100000

    from exam_builder.learnability import LearnReport

    table = LearnReport.model_validate(report)
    problems = learn_problems(table, public_bank=False)
    assert problems and "too few steps to judge" in problems[0]
    assert verdict(table, public_bank=False).startswith("verdict: too few steps to judge")


def test_the_default_budget_is_the_scale_s_steps(exam: Path, tmp_path: Path) -> None:
    """Without --steps a family trains the scale's steps (stopped here by a cap at once, so
    the test trains nothing: the row still records the budget it had)."""
    out = tmp_path / "learn.json"
    args = ["--bank", str(BANK), "--exam", str(exam), "--families", "hashed"]
    result = CliRunner().invoke(cli, ["learn-exam", *args, "--seconds", "1", "--json", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["steps_per_family"] == CPU.steps == report["rows"][0]["budget_steps"]
    assert f"{CPU.steps:,} steps a family, cap 1 s" in result.output
