"""The public-side learner (`toolkit learn-exam --randomize`): trained only on a public bank's
generators with every register parameter drawn per document, graded on an exam whose own bank
it never reads."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from exam_builder.bank import load_bank
from exam_builder.build import build_exam
from exam_builder.families.register import SEPARATORS
from toolkit.cli import cli
from toolkit.learn.randomized import RandomizedCorpus, draw_register

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "exam_builder" / "banks" / "public" / "demo"
EIGHT = REPO / "tests" / "exam_builder" / "banks" / "eight"
POOL = REPO / "tests" / "exam_builder" / "pool"


def test_a_drawn_register_varies_everything_a_hidden_bank_may_change() -> None:
    rng = random.Random(0)
    drawn = [draw_register(rng) for _ in range(300)]
    assert {r.separator for r in drawn} == set(SEPARATORS)
    assert {r.pairs for r in drawn} == set(range(3, 13))
    assert {r.width for r in drawn} == {2, 3, 4, 5}
    assert len({r.keys for r in drawn}) == 3 and len({r.letters for r in drawn}) == 2
    assert len({r.phrases.heading for r in drawn}) > 200
    assert len({r.phrases.question.split()[0] for r in drawn}) > 150
    assert all(not r.names and not r.decoys for r in drawn)  # what a bank keeps secret
    assert {draw_register(rng, pairs=3).pairs for _ in range(20)} == {3}


def test_every_document_draws_its_own_register_from_the_public_bank() -> None:
    demo = load_bank(DEMO)
    entry = next(e for e in demo.families if e.family.name == "records")
    corpus = RandomizedCorpus(demo, entry)
    tier_one = [corpus.document(n) for n in range(40)]
    headings = {d.text().split("\n", 1)[0] for d in tier_one if d.tiers == [1] * len(d.tiers)}
    assert len(headings) > 5, headings


def test_the_public_side_learner_never_trains_on_a_bank_that_is_not_public() -> None:
    eight = load_bank(EIGHT)
    with pytest.raises(ValueError, match="public bank only"):
        RandomizedCorpus(eight, eight.families[0])


def test_the_public_side_learner_grades_an_exam_whose_bank_it_never_reads(
    tmp_path: Path,
) -> None:
    """The hidden bank is gone before the learner starts: it reads the exam file alone."""
    hidden = Path(shutil.copytree(EIGHT, tmp_path / "hidden"))
    exam = tmp_path / "exam"
    build_exam(hidden, exam, english_text=None, allow_in_repo=True, pool=[POOL])
    shutil.rmtree(hidden)
    out = tmp_path / "learn.json"
    args = ["--randomize", "--bank", str(DEMO), "--exam", str(exam), "--families", "records"]
    result = CliRunner().invoke(cli, ["learn-exam", *args, "--steps", "2", "--json", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["learner"] == "public-side" and report["bank_id"] == "demo"
    assert "Public-side learner" in result.output and "verdict:" in result.output
    assert {r["family"] for r in report["rows"]} == {"records"}
