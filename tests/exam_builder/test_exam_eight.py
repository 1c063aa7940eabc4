"""A hidden-style bank with all eight kinds of question the methodology names
(tests/exam_builder/banks/eight): the model-free gate accepts it with the tests' private pool,
every family asks tier 1 in its own wording, and the variants a hidden bank must leave out
(a glossary, a string rule, a progression, the lists family's own tier read with its wording
inferred) are refused when put back.

Its learnable side (the reference learner at the cpu scale) is measured, not tested here: it
takes ten minutes a family (site/docs/maintainers/exams.md, the learnability frontier)."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

from exam_builder.build import BuildError, build_exam, prepare_exam
from exam_builder.exam_file import load_exam
from exam_builder.families import BUILTIN
from exam_builder.quality import GENERIC_LIMIT

HERE = Path(__file__).parent
EIGHT = HERE / "banks" / "eight"
POOL = HERE / "pool"
TIER_ONE_ONLY = ("vocabulary", "symbolic", "numeric", "lists")  # own tiers read by rules


def test_the_eight_kinds_bank_passes_the_model_free_gate(tmp_path: Path, english: bytes) -> None:
    out = tmp_path / "exam"
    manifest = build_exam(EIGHT, out, english_text=english, allow_in_repo=True, pool=[POOL])
    report = manifest.quality
    assert not report.public_bank
    assert list(manifest.families) == list(BUILTIN), "all eight kinds, in the engine's order"
    for name, fq in report.families.items():
        assert fq.reference == 100.0, name
        assert fq.public_engine == 0.0, name
        assert fq.baseline is not None and fq.baseline <= 5.0, name
        assert fq.chance is not None and fq.chance <= 2.0, (name, fq.chance)
        assert max(fq.generic.values()) <= GENERIC_LIMIT, (name, fq.generic)
        assert fq.pool is not None and fq.pool <= GENERIC_LIMIT, (name, fq.pool)
    tiers = Counter((q.family, q.tier) for q in load_exam(out))
    for family in BUILTIN:
        asked = {tier for (name, tier), n in tiers.items() if name == family and n}
        assert 1 in asked, family
        assert asked == ({1} if family in TIER_ONE_ONLY else {1, BUILTIN[family].tiers[0]}), (
            family,
            asked,
        )
    tier_one = sum(n for (_, tier), n in tiers.items() if tier == 1)
    assert 0.4 * manifest.questions <= tier_one < manifest.questions


def _reworked(tmp_path: Path, old: str, new: str) -> Path:
    bank = Path(shutil.copytree(EIGHT, tmp_path / "bank"))
    toml = bank / "bank.toml"
    text = toml.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    toml.write_text(text.replace(old, new), encoding="utf-8")
    return bank


@pytest.mark.parametrize(
    ("old", "new", "cracked"),
    [
        (
            'tiers = {1 = 1}\n[families.params.lookup]\nseparator = ":"',
            'tiers = {1 = 0.4, 3 = 0.6}\n[families.params.lookup]\nseparator = ":"',
            "definition answers vocabulary",
        ),
        (
            'tiers = {1 = 1}\n[families.params.lookup]\nseparator = "_"',
            'tiers = {1 = 0.4, 3 = 0.6}\n[families.params.lookup]\nseparator = "_"',
            "string_rule answers symbolic",
        ),
        (
            'tiers = {1 = 1}\n[families.params.lookup]\nseparator = "|"',
            'tiers = {1 = 0.4, 3 = 0.6}\n[families.params.lookup]\nseparator = "|"',
            "answers numeric",
        ),
        (
            "tiers = {1 = 1}\nmin_length = 9",
            "tiers = {1 = 0.4, 3 = 0.6}\nmin_length = 9",
            "wording_lists answers lists",
        ),
    ],
    ids=["vocabulary-glossary", "symbolic-string-rule", "numeric-sequence", "lists-own-tier"],
)
def test_what_the_bank_leaves_out_is_refused_when_put_back(
    tmp_path: Path, old: str, new: str, cracked: str
) -> None:
    """Why the bank asks these families what it asks: their other variants are read by a
    generic solver whatever their wording, and the gate refuses the bank naming it."""
    bank = _reworked(tmp_path, old, new)
    prepared = prepare_exam(bank, english_text=None, pool=[POOL])
    problems = " ".join(prepared.problems)
    assert cracked in problems, problems
    with pytest.raises(BuildError):
        build_exam(bank, tmp_path / "exam", english_text=None, allow_in_repo=True, pool=[POOL])
    assert not (tmp_path / "exam").exists()
