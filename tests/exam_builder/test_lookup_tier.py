"""Tier 1 of every built-in family: a register look-up (exam_builder/families/register.py).

Attacks first: a blind guesser, the generic structure readers and the public engine must score
nothing on a hidden-style bank's tier 1, whatever the family. The public layout (a key glued to
its value) is read by the entry readers (test_entry_readers.py) whatever its wording, so a
hidden-style bank asks its registers by its own names for the keys, among decoy registers."""

from __future__ import annotations

import random
import re
import string
from pathlib import Path

import pytest
from exam_helpers import DEMO, MakeBank
from pydantic import ValidationError

from exam_builder.bank import load_bank
from exam_builder.build import BuildError, build_exam, prepare_exam
from exam_builder.document import MASK
from exam_builder.exam_file import load_exam
from exam_builder.families import BUILTIN
from exam_builder.families.register import SEPARATORS, Register, RegisterPhrases
from exam_builder.generate import generate_questions
from exam_builder.lexicon import Lexicon
from exam_builder.solvers import GENERIC, run

ENTRY_READERS = {"key_glued", "register"}
"""The entry readers that read the public layout (a key glued to its value)."""

HIDDEN_SYLLABLES = (
    '["pe", "sku", "wan", "dri", "oth", "umb", "fay", "cle", "nir", "gos", "abo", "tep"]'
)

# A hidden bank's own wording and separator per family: nothing here is a default.
HIDDEN_WORDING = {
    "passages": ("Hod", "fix {key}", "/"),
    "records": ("Cup", "ask {key}", "-"),
    "vocabulary": ("Jag", "wet {key}", ":"),
    "schedules": ("Bay", "mid {key}", "+"),
    "lists": ("Peg", "row {key}", "~"),
    "symbolic": ("Rune", "ok {key}", "_"),
    "numeric": ("Vat", "hue {key}", "|"),
    "extraction": ("Tab", "get {key}", "="),
}
# Its own names for the keys, and the headings of its decoy registers.
HIDDEN_NAMES = (
    '["vost", "mire", "tallow", "quen", "rusk", "haddo", "pelt", "ombra", "sile", "crake"]'
)
HIDDEN_DECOYS = '["Dell", "Ward", "Yard", "Moot"]'
KEYS = "DFGKLMNQSW"


def _family_block(family: str, mix: str, wording: tuple[str, str, str] | None) -> str:
    block = f"""
        [[families]]
        family = "{family}"
        count = 40
        [families.params]
        questions = 6
        tiers = {mix}
        """
    if wording is not None:
        heading, question, separator = wording
        block += f"""
        [families.params.lookup]
        separator = "{separator}"
        pairs = 10
        width = 2
        keys = "{KEYS}"
        names = {HIDDEN_NAMES}
        decoys = 4
        decoy_headings = {HIDDEN_DECOYS}
        [families.params.lookup.phrases]
        heading = "{heading}"
        question = "{question}"
        """
    return block


def _tier1_bank(make_bank: MakeBank, *, hidden_wording: bool, public: bool = False) -> Path:
    toml = f"""
        id = "tier-one"
        public = {str(public).lower()}
        seed = "a hidden-style tier-1 bank of the tests"
        syllables = {HIDDEN_SYLLABLES}
        """
    for family in BUILTIN:
        wording = HIDDEN_WORDING[family] if hidden_wording else None
        toml += _family_block(family, "{1 = 1}", wording)
    return make_bank(toml)


def test_a_hidden_style_tier_one_bank_passes_the_model_free_gate(
    make_bank: MakeBank, tmp_path: Path
) -> None:
    """Every family's tier 1, in a hidden bank's own wording, separator and names among
    decoys: the reference solver reads all of it, and the gate (chance, generic solvers,
    public engine) accepts."""
    out = tmp_path / "exam"
    manifest = build_exam(_tier1_bank(make_bank, hidden_wording=True), out, english_text=None)
    quality = manifest.quality
    for name, fq in quality.families.items():
        assert fq.reference == 100.0, name
        assert fq.public_engine == 0.0, name
        assert fq.chance is not None and fq.chance <= 2.0, (name, fq.chance)
        assert max(fq.generic.values()) == 0.0, (name, fq.generic)
        assert fq.tiers is not None and list(fq.tiers) == [1], name
    assert {q.tier for q in load_exam(out)} == {1}


def test_the_public_wording_is_read_by_the_public_engine_and_refused(
    make_bank: MakeBank, tmp_path: Path
) -> None:
    """A hidden bank that keeps the default register wording is answered by anyone with this
    repository: the gate refuses it, naming the families."""
    bank = _tier1_bank(make_bank, hidden_wording=False)
    assert prepare_exam(bank, english_text=None).manifest.quality.total.public_engine == 100.0
    with pytest.raises(BuildError) as info:
        build_exam(bank, tmp_path / "exam", english_text=None)
    assert not (tmp_path / "exam").exists()
    assert "public engine" in str(info.value) and "records (100.0%" in str(info.value)


@pytest.mark.parametrize("family", list(BUILTIN))
def test_what_follows_the_key_is_never_the_answer(family: str) -> None:
    """The copy attack: the answer's letters are never a span of the prompt (so a copy from
    the register, a pick among spans and the induction solver are all wrong), and every
    generic solver but the entry readers and the family's own solver misses (they drop the
    separator: the public layout is no secret, test_entry_readers.py)."""
    fam = BUILTIN[family]
    params = fam.params(tiers={1: 1.0}, questions=6)
    for seed in range(25):
        rng = random.Random(seed)
        doc = fam.generate(rng, params, Lexicon(rng, ["pe", "sku", "wan", "dri", "oth", "umb"]))
        assert set(doc.tiers) == {1}
        for prompt, answer in doc.prompts():
            assert answer not in prompt, (prompt, answer)
            assert fam.solve(prompt, params) == answer
            for solver in GENERIC.values():
                guess = run(solver, prompt)
                read = guess is not None and guess.startswith(answer)
                readers = ENTRY_READERS | {f"wording_{family}"}
                assert read == (solver.name in readers), (solver.name, prompt)


def test_a_register_is_one_line_of_same_shape_entries_with_letters_used_once() -> None:
    register = Register(phrases=RegisterPhrases(heading="Bins", question="bin {key}"))
    doc = register.document(random.Random(3), questions=6)
    heading, line, *asks = doc.text().splitlines()
    assert heading == "Bins" and len(asks) == 6
    entries = line.split(" ")
    assert len(entries) == 6
    for entry in entries:
        assert re.fullmatch(r"[A-Z][a-z]\.[a-z]\.[a-z]", entry), entry
    letters = "".join(e[1:].replace(".", "") for e in entries)
    assert len(set(letters)) == len(letters) == 18
    assert not set(letters) & set("Bins" + "bin "), "a value letter is in the wording"
    assert MASK in doc.prompts()[-1][0]


def test_a_mix_marks_every_question() -> None:
    fam = BUILTIN["records"]
    mixed = fam.params(tiers={1: 1.0, 2: 1.0})
    tiers: set[int | None] = set()
    for seed in range(20):
        rng = random.Random(seed)
        tiers |= set(fam.generate(rng, mixed, Lexicon(rng, ["ka", "vo", "rel", "tam"])).tiers)
    assert tiers == {1, 2}
    # The demo bank sets a mix: every question is marked (a bank without one keeps its bytes:
    # test_exam_tiers.py, test_a_bank_without_a_mix_keeps_the_exam_bytes_it_had).
    assert all(q.tier in (1, 2, 3) for q in generate_questions(load_bank(DEMO)))


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"separator": "a"}, "a separator is one of"),
        ({"separator": " "}, "a separator is one of"),
        ({"keys": "ABCa", "letters": "abc"}, "must not share"),
        ({"keys": "AB C"}, "distinct ASCII letters or digits"),
        ({"pairs": 9, "width": 3}, "need 27 letters"),
        ({"phrases": {"heading": "Hold", "question": "{key} holds"}}, "must end with {key}"),
        ({"phrases": {"heading": "abcdefghijklmn", "question": "bin {key}"}}, "letters:"),
        ({"phrases": {"heading": string.ascii_uppercase[:22], "question": "b {key}"}}, "keys:"),
    ],
)
def test_a_bad_register_is_refused_naming_the_field(fields: dict[str, object], words: str) -> None:
    with pytest.raises(ValidationError) as info:
        Register.model_validate(fields)
    assert words in str(info.value)
    assert set(SEPARATORS).isdisjoint(string.ascii_letters + string.digits + " ")
