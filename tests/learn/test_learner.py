"""The reference learner (`toolkit learn-exam`) on a tiny scale: a family any model learns in
seconds passes, a family that no small model can learn (answers are hashes) scores 0, and the
table and its JSON say so; the learnable side of the gate reads that table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from exam_builder.bank import load_bank
from exam_builder.build import PreparedExam, build_exam, prepare_exam, with_learnability
from exam_builder.learnability import EXAM_FLOOR, TIER1_FLOOR, LearnReport, LearnRow, learn_problems
from exam_builder.learnability import totals as learn_totals
from toolkit.cli import cli
from toolkit.learn.corpus import MASK_BYTES, Corpus, learn_seed
from toolkit.learn.scale import CPU
from toolkit.learn.trainer import train_family

BANK = Path(__file__).parent / "bank"
EIGHT = Path(__file__).parents[1] / "exam_builder" / "banks" / "eight"


@pytest.fixture(scope="module")
def exam(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("learner-exam") / "exam"
    build_exam(BANK, out, english_text=None)
    return out


@pytest.mark.slow
def test_the_learner_passes_a_learnable_family_and_never_an_unlearnable_one(
    exam: Path, tmp_path: Path
) -> None:
    out = tmp_path / "learn.json"
    args = ["--bank", str(BANK), "--exam", str(exam), "--steps", "12", "--json", str(out)]
    result = CliRunner().invoke(cli, ["learn-exam", *args])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    rows = {row["family"]: row for row in report["rows"]}
    assert set(rows) == {"constant", "hashed"}
    for row in rows.values():
        assert {"family", "tier", "total", "passed", "percent"} <= set(row)
        assert row["tier"] == 1 and row["total"] == 6 and row["steps"] > 0
    assert rows["constant"]["passed"] >= 5, rows["constant"]
    assert rows["hashed"]["passed"] == 0, rows["hashed"]
    assert report["total"]["total"] == 12
    assert "Reference learner (cpu scale" in result.output
    assert "constant: " in result.output and "hashed: 0/6 passed" in result.output


def test_a_seed_draws_another_model_and_the_table_says_which(exam: Path, tmp_path: Path) -> None:
    """`--seed` redraws the model (a look-up's crossing is a lottery on its initial weights),
    and the table and its JSON record the draw."""
    out = tmp_path / "learn.json"
    args = ["--bank", str(BANK), "--exam", str(exam), "--families", "constant"]
    result = CliRunner().invoke(
        cli, ["learn-exam", *args, "--steps", "2", "--seed", "3", "--json", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["seed"] == 3
    assert "seed 3" in result.output
    bad = CliRunner().invoke(cli, ["learn-exam", *args, "--seed", "-1"])
    assert bad.exit_code == 2 and "--seed" in bad.output

    bank = load_bank(BANK)
    entry = next(e for e in bank.families if e.family.name == "constant")

    def initial_weights(seed: int, name: str) -> bytes:
        corpus = Corpus(bank, entry, mask_share=0.5, text_weight=0.1)
        trained = train_family(corpus, CPU, tmp_path / name, steps=1, seconds=1e-9, seed=seed)
        assert trained.steps == 0 and trained.cut  # the cap came before the first step
        return (tmp_path / name / "weights.pt").read_bytes()

    assert initial_weights(0, "a") == initial_weights(0, "b")
    assert initial_weights(0, "c") != initial_weights(1, "d")


def test_training_text_comes_from_seeds_the_exam_never_uses(exam: Path) -> None:
    bank = load_bank(BANK)
    entry = next(e for e in bank.families if e.family.name == "hashed")
    assert learn_seed(bank) != bank.seed
    corpus = Corpus(bank, entry, mask_share=0.5, text_weight=0.1)
    examples = corpus.take(40)
    exam_text = (exam / "exam.jsonl").read_text()
    for ex in examples:
        for line in ex.data.decode().splitlines():
            if line.startswith("Seal of ") and ": " in line and "\u2592" not in line:
                assert line not in exam_text  # a training question is never an exam question
        # A masked answer slot is never a target; an answer written out always is.
        at = ex.data.find(MASK_BYTES)
        if at >= 0:
            assert ex.weights[at : at + len(MASK_BYTES)] == [0.0] * len(MASK_BYTES)
    assert any(MASK_BYTES in ex.data for ex in examples)
    assert any(1.0 in ex.weights for ex in examples)


def test_a_batch_in_bytes_holds_whole_documents_up_to_its_budget() -> None:
    """`Corpus.take_bytes`: whole documents until the budget is reached (a long document
    counted as the window the trainer cuts from it), never none, and the stream goes on
    where it stopped."""
    bank = load_bank(BANK)
    entry = next(e for e in bank.families if e.family.name == "hashed")
    corpus = Corpus(bank, entry, mask_share=0.5, text_weight=0.1)
    sizes = [len(ex.data) for ex in Corpus(bank, entry, mask_share=0.5, text_weight=0.1).take(12)]
    batch = corpus.take_bytes(sum(sizes[:3]), block=1024)
    assert [len(ex.data) for ex in batch] == sizes[:3]
    assert [len(ex.data) for ex in corpus.take_bytes(1, block=1024)] == sizes[3:4]
    assert len(corpus.take_bytes(900, block=8)) == 100  # each counted as its 9-byte window
    assert corpus.documents == 104


def test_usage_errors_come_before_any_training(exam: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    bad_family = runner.invoke(
        cli, ["learn-exam", "--bank", str(BANK), "--exam", str(exam), "--families", "nope"]
    )
    assert bad_family.exit_code == 2 and "'nope' is not a family" in bad_family.output
    no_steps = runner.invoke(
        cli, ["learn-exam", "--bank", str(BANK), "--exam", str(exam), "--steps", "0"]
    )
    assert no_steps.exit_code == 2 and "--steps" in no_steps.output
    not_public = runner.invoke(
        cli, ["learn-exam", "--randomize", "--bank", str(EIGHT), "--exam", str(exam)]
    )
    assert not_public.exit_code == 2 and "is not public" in not_public.output
    other = tmp_path / "other.jsonl"
    other.write_text(
        '{"answer":"x","family":"records","id":"records-0000-0","prompt":"p"}\n', encoding="utf-8"
    )
    wrong_exam = runner.invoke(cli, ["learn-exam", "--bank", str(BANK), "--exam", str(other)])
    assert wrong_exam.exit_code == 2 and "families the bank does not make: records" in (
        wrong_exam.output
    )


def _row(family: str, tier: int, passed: int, total: int) -> LearnRow:
    pct = round(100 * passed / total, 2)
    return LearnRow(
        family=family,
        tier=tier,
        total=total,
        passed=passed,
        percent=pct,
        steps=1,
        bytes_seen=1,
        final_loss=1.0,
        seconds=1.0,
    )


def _report(rows: list[LearnRow], scale: str = "cpu") -> LearnReport:
    return LearnReport(
        scale=scale,
        device="cpu",
        model="m",
        seconds_per_family=1,
        bank_id="b",
        exam_sha256="0" * 64,
        rows=rows,
        families={},
        tiers={},
        total=learn_totals(rows),
    )


def test_the_learnable_side_refuses_an_unlearnable_tier_1_and_a_low_exam() -> None:
    good = _report([_row("a", 1, 6, 10), _row("a", 2, 1, 10), _row("b", 1, 5, 10)])
    assert good.total.percent >= EXAM_FLOOR and not learn_problems(good, public_bank=False)
    low = _report([_row("a", 1, 6, 10), _row("b", 1, 4, 10), _row("b", 3, 0, 80)])
    problems = learn_problems(low, public_bank=False)
    assert any(f"under {TIER1_FLOOR:g}%" in p and "b (4/10)" in p for p in problems), problems
    assert any("passes 10% of the exam" in p for p in problems), problems
    assert "a (6/10)" not in " ".join(problems)
    assert learn_problems(low, public_bank=True) == []  # a public bank is measured, not gated
    assert learn_problems(_report(low.rows, scale="gpu"), public_bank=False) == []
    none = _report([_row("a", 2, 9, 10)])
    assert any("no tier-1 question" in p for p in learn_problems(none, public_bank=False))


def test_a_build_with_the_learner_records_its_table_in_the_manifest() -> None:
    prepared = prepare_exam(BANK, english_text=None)
    table = _report([_row("constant", 1, 6, 6), _row("hashed", 1, 0, 6)])

    def learner(p: PreparedExam) -> LearnReport:
        assert p is prepared
        return table

    learned = with_learnability(prepared, learner)
    assert learned.manifest.learnability == table
    assert learned.exam_bytes == prepared.exam_bytes
    assert learned.problems == []  # the test bank is public: measured, not gated
    assert '"learnability"' in learned.manifest.to_json()
    assert '"learnability"' not in prepared.manifest.to_json()  # absent, not null


def test_the_frontier_benchmark_reads_variants_and_its_bank_builds() -> None:
    from tests import benchmark_scripts

    bench = benchmark_scripts.load("bench_learner")
    scale = bench.variant("cpu+d_model=64+n_layer=3+lr=0.01+batch_size=32")
    assert (scale.shape.d_model, scale.shape.n_layer) == (64, 3)
    assert (scale.lr, scale.batch_size, scale.name) == (0.01, 32, "cpu")
    with pytest.raises(SystemExit, match="unknown field"):
        bench.variant("cpu+depth=3")
    quality = prepare_exam(bench.VARIANTS, english_text=None).manifest.quality
    for name, fq in quality.families.items():
        assert fq.reference == 100.0, name
        assert fq.tiers is not None and list(fq.tiers) == [1], name
