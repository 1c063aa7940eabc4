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


BANK = """id = "hidden-style-one"
seed = "a hidden-style bank of the public-side tests, 3c9e0f5a1b7d"
syllables = ["pe", "sku", "wan", "dri", "oth", "umb", "fay", "cle", "nir", "gos", "abo", "tep"]

[[families]]
family = "records"
count = 8
[families.params]
questions = 4
tiers = {1 = 1}
[families.params.lookup]
pairs = 10
width = 2
separator = "^"
keys = "BDFGHJKLMN"
names = ["vost", "mire", "tallow", "quen", "rusk", "haddo", "pelt", "ombra", "sile", "crake"]
decoys = 4
decoy_headings = ["Dell", "Ward", "Yard", "Moot"]
[families.params.lookup.phrases]
heading = "Cup"
question = "ask {key}"
"""


def test_build_exam_prints_both_learners_beside_the_model_free_side(tmp_path: Path) -> None:
    bank = tmp_path / "bank"
    bank.mkdir()
    (bank / "bank.toml").write_text(BANK, encoding="utf-8")
    args = ["build-exam", "--bank", str(bank), "--check", "--learn", "cpu", "--learn-steps", "2"]
    result = CliRunner().invoke(cli, [*args, "--learn-public", str(DEMO)], terminal_width=200)
    # Two steps pass nothing: the reference learner's floors refuse the exam, after the tables.
    assert result.exit_code == 1, result.output
    assert "public-side learner: trained on bank demo" in result.output
    assert "reference learner" in result.output and "public-side learner" in result.output
    assert "exam refused" in result.output and "reference learner (cpu scale)" in result.output
    # The gate trains two draws a family by default (one draw proved a lottery: exams.md).
    assert "2 steps each at the cpu scale, best of 2 draws" in result.output
    assert "2 steps a family, best of 2 draws)" in result.output
    not_public = CliRunner().invoke(cli, [*args, "--learn-public", str(EIGHT)])
    assert not_public.exit_code == 2 and "not a public bank" in not_public.output
    alone = CliRunner().invoke(
        cli, ["build-exam", "--bank", str(bank), "--check", "--learn-steps", "5"]
    )
    assert alone.exit_code == 2 and "go with --learn" in alone.output
    draws = CliRunner().invoke(
        cli, ["build-exam", "--bank", str(bank), "--check", "--learn-draws", "1"]
    )
    assert draws.exit_code == 2 and "go with --learn" in draws.output
