"""The quality report: reference 100%, English baseline <= 5%, figures printed and stored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from exam_helpers import DEMO, SYLLABLES, VALIDATION, MakeBank
from pytest import MonkeyPatch

from exam_builder.bank import Bank, load_bank
from exam_builder.baselines import NgramModel, copy_continue
from exam_builder.build import BuildError, build_exam
from exam_builder.families import BUILTIN
from exam_builder.generate import GeneratedDocument
from exam_builder.quality import BASELINE_LIMIT, quality_report
from toolkit.cli import cli


def test_reference_100_and_baseline_low_on_every_family(
    demo_bank: Bank, demo_documents: list[GeneratedDocument], english: bytes
) -> None:
    report = quality_report(demo_bank, demo_documents, english)
    assert list(report.families) == list(BUILTIN)
    for name, fq in report.families.items():
        assert fq.reference == 100.0, name
        assert fq.baseline is not None and fq.baseline <= BASELINE_LIMIT, name
        assert 0.0 <= fq.copy_ <= 100.0
    assert report.total.questions == 100
    assert report.baseline is not None and report.baseline.training_bytes == len(english)


def test_build_exam_prints_and_stores_the_report(tmp_path: Path) -> None:
    out = tmp_path / "exam"
    result = CliRunner().invoke(
        cli, ["build-exam", "--bank", str(DEMO), "--out", str(out)], terminal_width=200
    )
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    for name in BUILTIN:
        assert name in result.output
    for column in ("reference", "baseline", "copy"):
        assert column in result.output
    assert manifest["exam_sha256"] in result.output
    assert manifest["quality"]["families"]["records"]["reference"] == 100.0
    assert manifest["families"] == {name: manifest["families"][name] for name in BUILTIN}
    assert sum(manifest["families"].values()) == 100
    assert "seed" not in json.dumps(manifest)  # the secret never leaves the bank


def test_validation_set_is_small_other_seed_fewer_families(tmp_path: Path, english: bytes) -> None:
    manifest = build_exam(VALIDATION, tmp_path / "v", english_text=english)
    assert 15 <= manifest.questions <= 25
    assert 2 <= len(manifest.families) < len(BUILTIN)
    assert load_bank(VALIDATION).seed != load_bank(DEMO).seed
    assert all(fq.reference == 100.0 for fq in manifest.quality.families.values())


def test_exam_whose_answers_english_guesses_is_refused(
    make_bank: MakeBank, tmp_path: Path, english: bytes
) -> None:
    # A plug-in whose answer is ordinary English after an ordinary English prefix.
    plugin = """
        from exam_builder.document import Document
        from exam_builder.families.base import Family, Params

        def generate(rng, params, lexicon):
            doc = Document()
            doc.say("The history of the United")
            doc.ask(" States")
            return doc

        FAMILY = Family("english", Params, generate, lambda prompt, params: " States")
    """
    bank = make_bank(
        f'id = "x"\nseed = "s"\nsyllables = {SYLLABLES}\n'
        '[[families]]\nfamily = "english"\ncount = 3\n',
        {"english.py": plugin},
    )
    with pytest.raises(BuildError, match="english: the context-free English baseline"):
        build_exam(bank, tmp_path / "out", english_text=english)
    assert not (tmp_path / "out").exists()


def test_exam_not_determined_by_its_prompt_is_refused(make_bank: MakeBank, tmp_path: Path) -> None:
    # The answer is drawn at random but never stated: no solver can know it.
    plugin = """
        from exam_builder.document import Document
        from exam_builder.families.base import Family, Params

        def generate(rng, params, lexicon):
            doc = Document()
            doc.say("Guess my word: ")
            doc.ask(lexicon.word())
            return doc

        FAMILY = Family("guess", Params, generate, lambda prompt, params: "no idea")
    """
    bank = make_bank(
        f'id = "x"\nseed = "s"\nsyllables = {SYLLABLES}\n'
        '[[families]]\nfamily = "guess"\ncount = 4\n',
        {"guess.py": plugin},
    )
    with pytest.raises(BuildError, match=r"family guess: the reference solver answers only 0\.0%"):
        build_exam(bank, tmp_path / "out", english_text=None)


def test_ngram_model_learns_and_backs_off() -> None:
    model = NgramModel(b"the cat sat on the mat. the cat sat on the hat. " * 20, order=4)
    assert model.generate(b"the c", 6) == b"at sat"
    assert len(model.generate(b"\x00\x01unseen", 5)) == 5  # falls back to shorter contexts
    assert model.generate(b"x", 0) == b""


def test_copy_heuristic_continues_the_longest_earlier_match() -> None:
    text = b"code ZQ-81 is red; code ZQ-77 is blue; code ZQ-8"
    assert copy_continue(text, 5) == b"1 is "
    assert copy_continue(b"abc", 2) == b"  "  # nothing to copy: spaces, still the right length


def test_ngram_lookup_is_exact_for_long_contexts() -> None:
    # Neighbouring 7-byte contexts: a float64 comparison would blur them into one another.
    text = b"\x10abcdee\xff" * 10 + b"\x10abcdefA" + b"\x10abcdeg\x00" * 10
    assert NgramModel(text, order=7).generate(b"\x10abcdef", 1) == b"A"


def test_check_builds_in_memory_and_writes_nothing(
    tmp_path: Path, monkeypatch: MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["build-exam", "--bank", str(VALIDATION), "--check"])
    assert result.exit_code == 0, result.output
    assert "check passed; nothing written" in result.output
    assert build_exam(VALIDATION, tmp_path / "v", english_text=None).exam_sha256 in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v"]


def test_check_reports_a_refused_exam(make_bank: MakeBank, tmp_path: Path) -> None:
    plugin = """
        from exam_builder.document import Document
        from exam_builder.families.base import Family, Params

        def generate(rng, params, lexicon):
            doc = Document()
            doc.say("Guess: ")
            doc.ask(lexicon.word())
            return doc

        FAMILY = Family("guess", Params, generate, lambda prompt, params: "?")
    """
    bank = make_bank(
        f'id = "x"\nseed = "s"\nsyllables = {SYLLABLES}\n'
        '[[families]]\nfamily = "guess"\ncount = 2\n',
        {"guess.py": plugin},
    )
    result = CliRunner().invoke(
        cli,
        ["build-exam", "--bank", str(bank), "--check", "--train-data", str(bank / "bank.toml")],
        terminal_width=200,
    )
    assert result.exit_code == 1
    assert "guess" in result.output and "reference solver answers only 0.0%" in result.output


def test_out_or_check_is_required() -> None:
    result = CliRunner().invoke(cli, ["build-exam", "--bank", str(VALIDATION)])
    assert result.exit_code == 2 and "--check" in result.output
