"""The chance floor (exam_builder.chance): a blind guesser's best strategy, gated per family.

Attacks: families whose answers are copied from a prompt with a few same-shape values, or
computed from a narrow range, must be refused for a bank that is not public; the floor is
published (manifest, track) but never the questions.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from exam_helpers import DEMO, SYLLABLES, MakeBank

from exam_builder.bank import BankError, load_bank
from exam_builder.build import BuildError, build_exam, prepare_exam
from exam_builder.chance import (
    CHANCE_LIMIT,
    best_constant,
    candidates,
    question_chance,
    shape_of,
    signs_chance,
)

STRUCTURED = Path(__file__).parent / "banks" / "structured"

# A copying family with four same-shape values in each prompt: 25% by a blind pick.
PETS = """
import re
from exam_builder.document import Document
from exam_builder.families.base import Family, Params, last_line


def generate(rng, params, lexicon):
    rows = [(lexicon.name(), lexicon.name()) for _ in range(4)]
    doc = Document()
    for owner, pet in rows:
        doc.say(f"{owner} keeps a pet named {pet}. ")
    doc.say("\\n")
    for owner, pet in rng.sample(rows, 3):
        doc.say(f"Pet of {owner}: ")
        doc.ask(pet)
        doc.say("\\n")
    return doc


def solve(prompt, params):
    owner = re.fullmatch(r"Pet of (\\w+): ", last_line(prompt))[1]
    return re.search(rf"{owner} keeps a pet named (\\w+)", prompt)[1]


FAMILY = Family("pets", Params, generate, solve, "copy a pet's name")
"""

# Computed answers from a narrow range: never in the prompt, but "1" is right one time in 9.
DIGITS = """
import re
from exam_builder.document import Document
from exam_builder.families.base import Family, Params, last_line


def generate(rng, params, lexicon):
    doc = Document()
    for _ in range(3):
        word = lexicon.word()
        doc.say(f"Take the word {word}. Its vowels, counted: ")
        doc.ask(str(sum(c in "aeiou" for c in word)))
        doc.say("\\n")
    return doc


def solve(prompt, params):
    word = re.search(r"Take the word (\\w+)\\. Its vowels, counted: $", prompt)[1]
    return str(sum(c in "aeiou" for c in word))


FAMILY = Family("digits", Params, generate, solve, "vowels counted")
"""


def _bank(make_bank: MakeBank, family: str, source: str, extra: str = "") -> Path:
    return make_bank(
        f'id = "floor"\n{extra}seed = "s"\nsyllables = {SYLLABLES}\n'
        f'[[families]]\nfamily = "{family}"\ncount = 30\n',
        {f"{family}.py": source},
    )


def test_shapes_and_candidates() -> None:
    assert [shape_of(a) for a in ("Orvak", "09:40", "KX-4821", "zimbar for dessa")] == [
        "Aa",
        "9:9",
        "A-9",
        "a a a",
    ]
    prompt = (
        "name | home | tool\nOrvak | Tellin | zimbar\nDessa | Korum | velk\n"
        "Mira | Sollo | quand\nThe tool of Dessa is "
    )
    found = candidates(prompt, "velk")
    # The records holding the question's rare tokens (Dessa's row, the header naming "tool"):
    assert found["record"] == ["name", "home", "velk"]
    assert set(found["fields"]) == {"name", "home", "tool", "zimbar", "velk", "quand"}
    assert question_chance(prompt, "velk")["record"] == pytest.approx(1 / 3)
    assert set(question_chance(prompt, "Velkor").values()) == {0.0}  # not in the prompt
    # The grader accepts a guess that starts with the answer: so does the floor.
    assert question_chance("Codes: 4821 and 5532.\nQ: ", "48")["shape"] == 0.5
    assert best_constant(["7", "7", "12", "1", "3"]) == ("12", 0.4)  # "12" also starts with "1"


def test_computed_answers_are_guessed_by_combining_the_prompt_numbers() -> None:
    prompt = "Orvak holds 120. Dessa holds 45. Mira holds 300.\nOrvak and Dessa together: "
    chance = question_chance(prompt, "165")
    assert chance["shape"] == 0.0  # 165 is nowhere in the prompt...
    assert chance["arith-record"] > 0.05 and chance["arith"] > 0.0  # ...but 120 + 45 is
    assert question_chance("Codes 4 and 7.\nQ: ", "11:00")["arith-record"] == 0.0
    clock = question_chance("Vel leaves 08:15, then 45 min.\nThe Vel arrives at ", "09:00")
    assert clock["arith-record"] > 0.0
    # A running count: the first number, then each with a random sign.
    assert signs_chance([10, 3, 4], "17") == signs_chance([10, 3, 4], "3") == 0.25
    assert signs_chance([10, 3, 4], "12") == 0.0 and signs_chance([], "1") == 0.0
    count = "Ulo opened with 200. Ulo paid Kem 30. Kem paid Ulo 12.\nUlo now holds: "
    assert question_chance(count, "182")["signs"] == 0.25


def test_a_copying_family_is_refused_naming_it_and_its_strategy(
    make_bank: MakeBank, tmp_path: Path
) -> None:
    bank = _bank(make_bank, "pets", PETS)
    prepared = prepare_exam(bank, english_text=None)
    pets = prepared.manifest.quality.families["pets"]
    assert pets.chance is not None and pets.chance >= 20.0, pets
    [problem] = [p for p in prepared.problems if "blind guesser" in p]
    assert f"pets ({pets.chance}% by '{pets.chance_strategy}')" in problem
    assert "computed" in problem  # the fix is in the line
    with pytest.raises(BuildError, match="blind guesser"):
        build_exam(bank, tmp_path / "exam", english_text=None)
    assert not (tmp_path / "exam").exists()


def test_a_narrow_computed_answer_is_refused_by_its_prior(
    make_bank: MakeBank, tmp_path: Path
) -> None:
    bank = _bank(make_bank, "digits", DIGITS)
    prepared = prepare_exam(bank, english_text=None)
    digits = prepared.manifest.quality.families["digits"]
    assert digits.chance_strategy == "prior" and digits.chance is not None
    assert digits.chance > 20.0
    assert any("digits" in p and "prior" in p for p in prepared.problems)


def test_a_public_bank_publishes_its_floor_and_is_not_refused(
    make_bank: MakeBank, tmp_path: Path
) -> None:
    bank = _bank(make_bank, "pets", PETS, extra="public = true\n")
    manifest = build_exam(bank, tmp_path / "exam", english_text=None)
    pets = manifest.quality.families["pets"]
    assert pets.chance is not None and pets.chance > CHANCE_LIMIT
    saved = json.loads((tmp_path / "exam" / "manifest.json").read_text())
    assert saved["quality"]["total"]["chance"] == manifest.quality.chance_floor == pets.chance
    assert saved["quality"]["chance_limit"] == CHANCE_LIMIT


def test_the_demo_floor_is_measured_and_under_the_limit_on_its_own_tiers(
    demo_copy: Path,
) -> None:
    """Before issue 28 part 3 the demo's look-ups copied a value of the prompt (floor 16.85%,
    records 41.76% by 'record'); its families now compose or compute every answer of their
    own tiers. Its tier 1 is the public register, whose entries a blind pick among the
    prompt's chunks with the punctuation dropped ('joined') finds one time in six or seven:
    a public bank shows the layout, it does not hide it (measured, not gated)."""
    report = prepare_exam(demo_copy, english_text=None).manifest.quality
    assert report.public_bank and report.chance_floor is not None
    for name, fq in report.families.items():
        assert fq.tiers is not None, name
        for tier, tq in fq.tiers.items():
            assert tq.chance is not None, (name, tier)
            if tier == 1:
                assert tq.chance > CHANCE_LIMIT and tq.chance_strategy == "joined", (name, tq)
            else:
                assert tq.chance <= CHANCE_LIMIT, (name, tier, tq.chance)


def test_a_bank_may_lower_the_limit_but_not_raise_it(make_bank: MakeBank) -> None:
    with pytest.raises(BankError, match=r"chance_limit: Input should be less than or equal to 2"):
        load_bank(_bank(make_bank, "pets", PETS, extra="chance_limit = 2.5\n"))
    lowered = Path(make_bank((STRUCTURED / "bank.toml").read_text(), name="strict"))
    (lowered / "plugins").mkdir()
    for plugin in (STRUCTURED / "plugins").glob("*.py"):
        (lowered / "plugins" / plugin.name).write_bytes(plugin.read_bytes())
    toml = lowered / "bank.toml"
    toml.write_text(toml.read_text().replace("\nseed", "\nchance_limit = 0.5\nseed"))
    prepared = prepare_exam(lowered, english_text=None)
    assert prepared.manifest.quality.chance_limit == 0.5
    assert any("blind guesser" in p and "limit 0.5%" in p for p in prepared.problems)
    assert not prepare_exam(STRUCTURED, english_text=None).problems


def test_the_structured_bank_is_under_the_floor() -> None:
    report = prepare_exam(STRUCTURED, english_text=None).manifest.quality
    for name, fq in report.families.items():
        assert fq.chance is not None and fq.chance <= CHANCE_LIMIT, (name, fq.chance)


def test_the_floor_reads_the_demo_prompts_quickly() -> None:
    """Not a timing test: every demo question yields a chance per strategy in [0, 1]."""
    from exam_builder.generate import generate_questions

    for q in generate_questions(DEMO):
        for p in question_chance(q.prompt[-1024:], q.answer).values():
            assert 0.0 <= p <= 1.0
