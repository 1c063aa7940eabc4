"""The entry readers (exam_builder/solvers/entries.py): what an attacker holding only the public
side writes against the tier-1 register, every parameter a hidden bank may change left free.

Attacks first: each reader reads the layout it is written for whatever the wording, separator,
alphabets, sizes and key width; the gate refuses a bank whose tier 1 only rewords the public
layout, naming the reader; and a register whose questions name the keys by the bank's own
words, among decoy registers (`Register.names`, `Register.decoys`), escapes every reader and
the blind guesser."""

from __future__ import annotations

import random
import string
from pathlib import Path

import pytest
from exam_helpers import MakeBank
from pydantic import ValidationError

from exam_builder.build import BuildError, build_exam, prepare_exam
from exam_builder.chance import question_chance
from exam_builder.families import BUILTIN
from exam_builder.families.register import SEPARATORS, Register, RegisterPhrases
from exam_builder.lexicon import Lexicon
from exam_builder.solvers import GENERIC, graded, run

READERS = ("key_glued", "key_trailing", "key_spaced", "register")


def _layout(rng: random.Random, how: str) -> tuple[str, str]:
    """A register prompt in one of four layouts, every parameter drawn: (prompt, answer)."""
    sep = rng.choice(SEPARATORS)
    width = rng.randint(2, 4)
    pairs = rng.randint(4, 9)
    key_width = rng.randint(1, 3)
    keys = set()
    while len(keys) < pairs:
        keys.add(
            "".join(rng.choice(string.ascii_uppercase + string.digits) for _ in range(key_width))
        )
    values = ["".join(rng.choice(string.ascii_lowercase) for _ in range(width)) for _ in keys]
    entries = []
    for key, value in zip(sorted(keys), values, strict=True):
        written = sep.join(value)
        entries.append(
            {
                "glued": key + written,
                "trailing": written + sep + key,
                "spaced": f"{key}{sep} {written}",
            }[how]
        )
    rng.shuffle(entries)
    asked = rng.randrange(pairs)
    key = sorted(keys)[asked]
    heading = rng.choice(["Bins", "Quire", "Husk", "Runes"])
    question = rng.choice(["bin", "what of", "look up"])
    return f"{heading}\n{' '.join(entries)}\n{question} {key}", values[asked]


@pytest.mark.parametrize(
    ("how", "readers"),
    [
        ("glued", ("key_glued", "register")),
        ("trailing", ("key_trailing", "register")),
        ("spaced", ("key_spaced", "register")),
    ],
)
def test_each_reader_reads_its_layout_whatever_the_parameters(
    how: str, readers: tuple[str, ...]
) -> None:
    rng = random.Random(how)
    prompts = [_layout(rng, how) for _ in range(60)]
    for name in readers:
        hits = sum(graded(run(GENERIC[name], prompt), answer) for prompt, answer in prompts)
        assert hits >= 57, (name, how, hits)


@pytest.mark.parametrize("family", list(BUILTIN))
def test_the_public_layout_is_read_in_every_family(family: str) -> None:
    """The register as the engine writes it, in each family's default wording: the readers
    answer it all (this was 40-70% of every exam before they joined the gate)."""
    fam = BUILTIN[family]
    params = fam.params(tiers={1: 1.0}, questions=6)
    for seed in range(10):
        rng = random.Random(seed)
        doc = fam.generate(rng, params, Lexicon(rng, ["pe", "sku", "wan", "dri", "oth", "umb"]))
        for prompt, answer in doc.prompts():
            assert graded(run(GENERIC["key_glued"], prompt), answer), prompt
            assert graded(run(GENERIC["register"], prompt), answer), prompt


NAMES = ("vost", "mire", "tallow", "quen", "rusk", "haddo", "pelt", "ombra", "sile", "crake")


def named(**changes: object) -> Register:
    """A register asked by names among decoys (the tests' hidden-style layout)."""
    fields: dict[str, object] = {
        "pairs": 10,
        "width": 2,
        "separator": "^",
        "keys": "BDFGHJKLMN",
        "names": NAMES,
        "decoys": 4,
        "decoy_headings": ("Dell", "Ward", "Yard", "Moot"),
        "phrases": RegisterPhrases(heading="Cup", question="ask {key}"),
    }
    return Register.model_validate(fields | changes)


def test_a_named_register_among_decoys_escapes_every_reader_and_the_blind_guesser() -> None:
    register = named()
    prompts = []
    for seed in range(30):
        doc = register.document(random.Random(seed), questions=4)
        prompts += doc.prompts()
    for prompt, answer in prompts:
        assert register.answer(prompt) == answer  # the reference solver reads it all
        for solver in GENERIC.values():
            assert not graded(run(solver, prompt), answer), (solver.name, prompt)
    chance = sum(max(question_chance(p, a).values()) for p, a in prompts) / len(prompts)
    assert chance <= 0.02, chance


def test_a_named_register_shows_every_heading_once_with_the_same_keys() -> None:
    register = named()
    doc = register.document(random.Random(5), questions=4)
    lines = doc.text().splitlines()
    headings = lines[0:10:2]
    assert sorted(headings) == sorted(["Cup", "Dell", "Ward", "Yard", "Moot"])
    key_sets = {frozenset(chunk[0] for chunk in line.split()) for line in lines[1:10:2]}
    assert len(key_sets) == 1 and len(next(iter(key_sets))) == 10
    asks = lines[10:]
    assert len(asks) == 4 and all(a.split()[1][:-2] in NAMES or a.split()[1] in NAMES for a in asks)
    assert not any(k in a for a in asks for k in "BDFGHJKLMN")  # a key is never written asked


def test_without_names_or_decoys_a_register_writes_what_it_wrote() -> None:
    """A bank that sets neither keeps its exam's bytes (the demo exam's hash is pinned)."""
    plain = Register(phrases=RegisterPhrases(heading="Bins", question="bin {key}"))
    text = plain.document(random.Random(3), questions=6).text()
    assert text.splitlines()[0] == "Bins" and len(text.splitlines()) == 8


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"names": NAMES[:9]}, "one per key"),
        ({"names": (*NAMES[:9], "Vost")}, "small ASCII letters"),
        ({"names": (*NAMES[:9], "vost")}, "a name of its own"),
        ({"decoy_headings": ("Dell", "Ward", "Yard")}, "one per decoy register"),
        ({"decoy_headings": ("Dell", "Ward", "Yard", "Cup")}, "each unlike the others"),
        (
            {"phrases": RegisterPhrases(heading="Cup", question="ward {key}")},
            "shares no word with a heading",
        ),
    ],
)
def test_a_bad_named_register_is_refused_naming_the_field(
    changes: dict[str, object], words: str
) -> None:
    with pytest.raises(ValidationError) as info:
        named(**changes)
    assert words in str(info.value)


def _bank(make_bank: MakeBank, lookup: str) -> Path:
    return make_bank(
        f"""
        id = "readers"
        seed = "a hidden-style bank of the reader tests, 5f1d9c0b7a3e"
        syllables = ["pe", "sku", "wan", "dri", "oth", "umb", "fay", "cle", "nir", "gos",
                     "abo", "tep"]

        [[families]]
        family = "records"
        count = 30
        [families.params]
        questions = 4
        tiers = {{1 = 1}}
        [families.params.lookup]
        {lookup}
        """
    )


def test_a_bank_whose_tier_one_rewords_the_public_layout_is_refused_naming_the_reader(
    make_bank: MakeBank, tmp_path: Path
) -> None:
    reworded = """separator = "~"
        keys = "0123456789"
        pairs = 7
        [families.params.lookup.phrases]
        heading = "Hut"
        question = "hut no. {key}"
        """
    bank = _bank(make_bank, reworded)
    problems = " ".join(prepare_exam(bank, english_text=None).problems)
    assert "key_glued answers records (100.0%)" in problems, problems
    assert "register answers records (100.0%)" in problems, problems
    with pytest.raises(BuildError):
        build_exam(bank, tmp_path / "exam", english_text=None)


def test_a_bank_with_a_named_register_among_decoys_passes_the_model_free_gate(
    make_bank: MakeBank, tmp_path: Path
) -> None:
    lookup = """pairs = 10
        width = 2
        separator = "^"
        keys = "BDFGHJKLMN"
        names = ["vost", "mire", "tallow", "quen", "rusk", "haddo", "pelt", "ombra", "sile",
                 "crake"]
        decoys = 4
        decoy_headings = ["Dell", "Ward", "Yard", "Moot"]
        [families.params.lookup.phrases]
        heading = "Cup"
        question = "ask {key}"
        """
    manifest = build_exam(_bank(make_bank, lookup), tmp_path / "exam", english_text=None)
    fq = manifest.quality.families["records"]
    assert fq.reference == 100.0 and fq.public_engine == 0.0
    assert max(fq.generic.values()) == 0.0, fq.generic
    assert fq.chance is not None and fq.chance <= 2.0, fq.chance


@pytest.mark.parametrize("family", list(BUILTIN))
def test_a_family_s_own_solver_reads_its_register_in_any_wording(family: str) -> None:
    """`wording_<family>` (exam_builder/solvers/wording.py): the family's solver with every
    phrase of its templates matched as any text reads the register whatever its question's
    words (its heading and separator are the family's defaults: no template holds them; the
    entry readers leave those free), and reads nothing of a named register among decoys."""
    fam = BUILTIN[family]
    solver = GENERIC[f"wording_{family}"]
    default = fam.params().lookup
    asked = RegisterPhrases(heading=default.phrases.heading, question="ask {key}")
    reworded = Register.model_validate(default.model_dump() | {"phrases": asked})
    params = fam.params(tiers={1: 1.0}, questions=6, lookup=reworded)
    hidden = fam.params(tiers={1: 1.0}, questions=4, lookup=named())
    for seed in range(6):
        for p, expect in ((params, True), (hidden, False)):
            rng = random.Random(seed)
            doc = fam.generate(rng, p, Lexicon(rng, ["pe", "sku", "wan", "dri", "oth", "umb"]))
            for prompt, answer in doc.prompts():
                assert graded(run(solver, prompt), answer) == expect, (family, expect, prompt)
