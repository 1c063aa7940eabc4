"""Several draws a family (`toolkit learn-exam --draws N`): the model kept is picked on held-out
questions of its own training text's generator, never on the exam.

One draw of a small model is a lottery on a look-up (measured: the same family and budget 6/6
with one seed, 0/6 with another). An agent with a validation set of its own would train twice
and keep the better; so does the learner, and the exam has no say in which.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from exam_builder.bank import load_bank
from exam_builder.build import build_exam
from exam_builder.generate import generate_questions
from toolkit.cli import cli
from toolkit.learn.corpus import focused
from toolkit.learn.randomized import RandomizedCorpus
from toolkit.learn.reference import HELD_OUT_QUESTIONS, corpus_of, held_out
from toolkit.learn.scale import scale

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "exam_builder" / "banks" / "public" / "demo"
EIGHT = REPO / "tests" / "exam_builder" / "banks" / "eight"
POOL = REPO / "tests" / "exam_builder" / "pool"


def test_held_out_questions_come_from_the_training_generator_and_never_the_exam() -> None:
    bank = load_bank(EIGHT)
    exam = generate_questions(bank)
    cpu = scale("cpu")
    for entry in bank.families:
        corpus = corpus_of(bank, focused(entry, cpu.train_tiers), cpu)
        checks = held_out(corpus, entry.family.name)
        assert len(checks) == HELD_OUT_QUESTIONS
        assert len({q.id for q in checks}) == len(checks)
        assert {q.family for q in checks} == {entry.family.name}
        assert checks == held_out(corpus, entry.family.name)  # the same every time
        asked = {q.prompt for q in exam if q.family == entry.family.name}
        assert not asked & {q.prompt for q in checks}, entry.family.name
        # Past anything a training reads: its first documents are not among them.
        trained = {p for n in range(200) for p, _ in corpus.document(n).prompts()}
        assert not trained & {q.prompt for q in checks}, entry.family.name


def test_the_public_side_learner_checks_its_draws_on_the_public_bank_only() -> None:
    demo = load_bank(DEMO)
    entry = next(e for e in demo.families if e.family.name == "records")
    checks = held_out(RandomizedCorpus(demo, entry), "records")
    headings = {q.prompt.split("\n", 1)[0] for q in checks}
    assert len(headings) > 3, headings  # drawn registers, as it trains on


def test_learn_exam_keeps_the_draw_that_passes_most_held_out_questions(tmp_path: Path) -> None:
    exam = tmp_path / "exam"
    build_exam(EIGHT, exam, english_text=None, allow_in_repo=True, pool=[POOL])
    out = tmp_path / "learn.json"
    args = ["--bank", str(EIGHT), "--exam", str(exam), "--families", "records"]
    args += ["--steps", "2", "--seed", "3", "--draws", "2", "--json", str(out)]
    result = CliRunner().invoke(cli, ["learn-exam", *args])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["draws"] == 2 and report["seed"] == 3
    for row in report["rows"]:
        assert row["draw"] in (3, 4)
        assert len(row["held_out"]) == 2 and row["held_out_total"] == HELD_OUT_QUESTIONS
        assert row["held_out"][row["draw"] - 3] == max(row["held_out"])
    assert "best of 2 draws" in result.output and "held-out" in result.output

    refused = CliRunner().invoke(cli, ["learn-exam", *args[:-4], "--draws", "5"])
    assert refused.exit_code == 2 and "--draws" in refused.output
