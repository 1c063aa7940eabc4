"""Difficulty tiers: a family declares them, the bank sets the mix, each question carries its
tier in the exam file (never in its prompt), and the quality report gives every figure per tier."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from exam_helpers import DEMO, REPO, SYLLABLES, MakeBank

from exam_builder.bank import BankError, load_bank
from exam_builder.build import build_exam, prepare_exam
from exam_builder.exam_file import load_exam, serialize, sha256_bytes
from exam_builder.generate import generate_questions, next_tier
from toolkit.tracks.model import load_tracks

TIERED = '''
"""Two tiers: a look-up (tier 1) or a sum of two numbers (tier 3)."""
import re
from exam_builder.document import Document
from exam_builder.families.base import Family, Params, last_line, pick_tier


def generate(rng, params, lexicon):
    tier = pick_tier(rng, params)
    names = lexicon.names(4)
    values = rng.sample(range(1000, 9999), 4)
    doc = Document()
    doc.say(" ".join(f"{n} owns {v}." for n, v in zip(names, values)) + "\\n")
    a, b = rng.sample(range(4), 2)
    if tier == 1:
        doc.say(f"Owned by {names[a]}: ")
        doc.ask(str(values[a]), tier=1)
    else:
        doc.say(f"{names[a]} and {names[b]} together: ")
        doc.ask(str(values[a] + values[b]), tier=3)
    doc.say("\\n")
    return doc


def solve(prompt, params):
    line = last_line(prompt)
    owns = dict(re.findall(r"([A-Z][a-z]+) owns (\\d+)", prompt))
    if m := re.fullmatch(r"Owned by ([A-Z][a-z]+): ", line):
        return owns[m[1]]
    m = re.fullmatch(r"([A-Z][a-z]+) and ([A-Z][a-z]+) together: ", line)
    return str(int(owns[m[1]]) + int(owns[m[2]]))


FAMILY = Family("owners", Params, generate, solve, "owners", tiers=(1, 3))
'''

UNMARKED = TIERED.replace("doc.ask(str(values[a]), tier=1)", "doc.ask(str(values[a]))")


def _bank(make_bank: MakeBank, mix: str, plugin: str = TIERED) -> Path:
    toml = f"""
        id = "tiers"
        public = true
        seed = "tiers"
        syllables = {SYLLABLES}
        [[families]]
        family = "owners"
        count = 60
        [families.params]
        questions = 1
        tiers = {mix}
        """
    return make_bank(toml, {"owners.py": plugin})


def test_the_bank_sets_the_mix_and_each_row_carries_its_tier(
    make_bank: MakeBank, tmp_path: Path
) -> None:
    out = tmp_path / "exam"
    build_exam(_bank(make_bank, "{1 = 1, 3 = 1}"), out, english_text=None)
    questions = load_exam(out)
    tiers = [q.tier for q in questions]
    assert set(tiers) == {1, 3} and tiers.count(1) == 30, tiers  # the exam follows the mix
    for n in range(1, len(tiers) + 1):  # at every point, not only at the end
        assert abs(tiers[:n].count(1) - n / 2) <= 1, tiers[:n]
    for line in (out / "exam.jsonl").read_text().splitlines():
        row = json.loads(line)
        assert row["tier"] in (1, 3)
        assert "tier" not in row["prompt"].lower()


def test_a_mix_of_one_tier_makes_only_that_tier(make_bank: MakeBank) -> None:
    questions = generate_questions(load_bank(_bank(make_bank, "{3 = 1}")))
    assert {q.tier for q in questions} == {3}


def test_the_quality_report_gives_every_figure_per_tier(make_bank: MakeBank) -> None:
    report = prepare_exam(_bank(make_bank, "{1 = 1, 3 = 1}"), english_text=None)
    quality = report.manifest.quality
    owners = quality.families["owners"]
    assert owners.tiers is not None and set(owners.tiers) == {1, 3}
    one, three = owners.tiers[1], owners.tiers[3]
    assert one.questions + three.questions == owners.questions == 60
    assert one.reference == three.reference == 100.0
    # The look-up's answer is a value of its prompt (a blind pick among four finds it); the
    # sum's is not: the tiers' figures say which part of the family a guesser reaches.
    assert one.chance is not None and one.chance > 20.0
    assert three.chance is not None and three.chance < one.chance
    assert quality.total.tiers is not None and set(quality.total.tiers) == {1, 3}
    # The family's floor is its best single strategy over both tiers: at most the tiers' own
    # bests, weighted by their questions.
    weighted = (one.chance * one.questions + three.chance * three.questions) / owners.questions
    assert owners.chance is not None and owners.chance <= weighted + 0.01


@pytest.mark.parametrize(
    ("mix", "plugin", "words"),
    [
        ("{2 = 1}", TIERED, "makes tiers [1, 3], not [2]"),
        ("{4 = 1}", TIERED, "a weight of at least 0 per tier"),
        ("{1 = 0, 3 = 0}", TIERED, "not all 0"),
        ("{1 = 1, 3 = 1}", UNMARKED, "an unmarked question"),
    ],
)
def test_a_bad_mix_or_an_unmarked_question_is_refused_naming_the_family(
    make_bank: MakeBank, mix: str, plugin: str, words: str
) -> None:
    with pytest.raises(BankError) as info:
        generate_questions(load_bank(_bank(make_bank, mix, plugin)))
    assert words in str(info.value) and "families[0]" in str(info.value)


def test_a_bank_without_a_mix_keeps_the_exam_bytes_it_had(tmp_path: Path) -> None:
    """With no tier mix in the bank, every built-in family makes its own tier only, unmarked:
    the demo bank without its mixes makes the exam of the demo track before tiers
    (`demo-cpu-2`), byte for byte."""
    bank = tmp_path / "demo"
    bank.mkdir()
    toml = (DEMO / "bank.toml").read_text(encoding="utf-8")
    assert "tiers = {" in toml
    (bank / "bank.toml").write_text(
        "\n".join(line for line in toml.splitlines() if not line.startswith("tiers = ")),
        encoding="utf-8",
    )
    questions = generate_questions(bank)
    assert all(q.tier is None for q in questions)
    before = load_tracks(REPO / "results")["demo-cpu-2"]
    assert before.matches_exam(sha256_bytes(serialize(questions)))
    report = prepare_exam(bank, english_text=None).manifest.quality
    assert report.families["schedules"].tiers is not None
    assert list(report.families["schedules"].tiers) == [3]
    assert list(report.families["records"].tiers or {}) == [2]


def test_the_demo_exam_follows_its_mix_in_every_family() -> None:
    """The public demo bank asks for 40% tier 1 in every family: each family's exam documents
    are chosen to follow it, so none is left without a look-up (a few documents drawn at random
    would leave some with none)."""
    questions = generate_questions(DEMO)
    for family in {q.family for q in questions}:
        tiers = [q.tier for q in questions if q.family == family]
        assert None not in tiers and 1 in tiers, family
        assert 0.3 <= tiers.count(1) / len(tiers) <= 0.6, (family, tiers)


@pytest.mark.parametrize("per_document", [1, 3, 6])
def test_the_next_tier_is_the_one_furthest_behind_its_share(per_document: int) -> None:
    mix = {1: 0.4, 2: 0.0, 3: 0.6}
    made: dict[int, int] = {}
    for _ in range(50):
        tier = next_tier(mix, made)
        assert tier in (1, 3)
        made[tier] = made.get(tier, 0) + per_document
        total = sum(made.values())
        assert abs(made.get(1, 0) - 0.4 * total) <= per_document, made
    assert next_tier({3: 1.0}, {}) is None and next_tier({}, {}) is None
