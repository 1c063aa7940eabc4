"""A bank can change every vocabulary and phrase of the built-in families and still be read
completely by the reference solvers; rewording defeats the public engine's own solvers but not
the generic ones (tests/exam_builder/banks/structured is a bank that passes both); and the
engine stays independent of toolkit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from exam_helpers import MakeBank

from exam_builder.bank import Bank
from exam_builder.build import BuildError, build_exam, prepare_exam
from exam_builder.families import BUILTIN
from exam_builder.generate import GeneratedDocument
from exam_builder.quality import quality_problems, quality_report

HIDDEN_LIKE = """
id = "hidden-like"
seed = "0f9e8d7c6b5a49382716051f2e3d4c5b6a79881726354453627180f9e8d7c6b5"
syllables = ["py", "lo", "gat", "nem", "sir", "ux", "bal", "hu", "tes", "wor", "cai", "ej",
             "fim", "rau", "zob"]

[[families]]
family = "passages"
count = 6
[families.params]
people = 4
facts_per_person = 1
ask = "Asked: {question} Said: "
openings = ["Notes kept at {place}, about {n} travellers."]
[[families.params.relations]]
fact = "{a} rides a mule called {b}."
question = "Which mule does {a} ride?"
[[families.params.relations]]
fact = "The lantern of {a} burns {b} oil (really!)."
question = "What oil (really?) does {a} burn?"

[[families]]
family = "records"
count = 6
[families.params]
rows = 7
groups = ["observatory"]
columns = [
  {name = "comet", kind = "name"},
  {name = "orbit", kind = "number", low = 1000, high = 9999},
  {name = "seal", kind = "code"},
]
[families.params.phrases]
forward = "{row} and {other} show, in {key}'s {value} place: "
reverse = "Whose are {value} and {other}? "

[[families]]
family = "vocabulary"
count = 6
[families.params]
meanings = ["salt", "iron", "wheel", "grain", "sail", "oar"]
phrase_words = 3
[families.params.phrases]
heading = "Lexicon of the {language} tongue{rule}."
plural_rule = " (many: suffix -{suffix})"
entry = "* {meaning} = {word}"
query = "Say '{phrase}' in {language}: "

[[families]]
family = "schedules"
count = 6
[families.params]
vehicles = ["caravan", "airship"]
departures = 6
first_hour = 3
last_hour = 20
longest_journey = 120
[families.params.phrases]
title = "Board at {place}: {vehicles}"
leg = "- between {start} and {end} it is {minutes} minutes"
line = "- {name} sets off from {origin} at {time}, via {via}, to {stop}"
arrives = "{name} gets in at "

[[families]]
family = "lists"
count = 6
[families.params]
min_length = 9
max_length = 12
kinds = ["stretch", "around", "backwards"]
[families.params.phrases]
heading = "Roll {list} = "
stretch = "Positions {n} through {m} in roll {list}, from the end: "
around = "In roll {list}, the neighbours of {item} are "
backwards = "Roll {list}, read from the end: "
both = "{before} then {after}"

[[families]]
family = "symbolic"
count = 6
[families.params]
examples = 4
rules = ["swap_pairs", "first_last_swap", "suffix"]
machines = ["oracle"]
[families.params.phrases]
heading = "What the {place} {machine} does to a word:"
example = "in {source} out {target} (done)"

[[families]]
family = "numeric"
count = 6
[families.params]
shown = 6
furthest_term = 15
operations = 0.5
largest_start = 500
[families.params.phrases]
sequence = "Row {name} begins {terms} and goes on"
term = "Entry number {n} of row {name} is "
define = "Examples of {verb}:"
apply = "{verb}({x}) gives "

[[families]]
family = "extraction"
count = 6
[families.params]
messages = 4
domains = ["qz", "lorn"]
years = [2101, 2150]
[families.params.phrases]
question = "Mail {key} shows {value}; mails {first} and {second} show there "
both = "{one} / {two}"
"""


def test_rewording_escapes_the_public_engine_but_not_the_generic_solvers(
    make_bank: MakeBank, tmp_path: Path, english: bytes
) -> None:
    """Every built-in family reworded: the engine's own solvers read none of it, but solvers
    of the families' structures (a glossary, a string rule, a line through examples) still
    do: refused."""
    bank = make_bank(HIDDEN_LIKE)
    prepared = prepare_exam(bank, english_text=english)
    manifest = prepared.manifest
    assert manifest.questions == 48 and list(manifest.families) == list(BUILTIN)
    assert not manifest.quality.public_bank
    for name, fq in manifest.quality.families.items():
        assert fq.reference == 100.0, name
        assert fq.baseline is not None and fq.baseline <= 5.0, name
        assert fq.public_engine is not None and fq.public_engine <= 5.0, name
    [problem] = [p for p in prepared.problems if p.startswith("generic model-free")]
    # Since issue 28 no built-in answer is a value of its prompt: a blind pick finds none.
    assert not [p for p in prepared.problems if p.startswith("a blind guesser")]
    for cracked in (
        "definition answers vocabulary",
        "string_rule answers symbolic",
        "number_rule answers numeric",  # an operation shown by examples is a line to fit
    ):
        assert cracked in problem, cracked
    for family in ("passages", "records", "schedules", "extraction"):  # composed or computed
        assert f"answers {family}" not in problem, family
    with pytest.raises(BuildError, match="generic model-free solvers"):
        build_exam(bank, tmp_path / "exam", english_text=english)
    assert not (tmp_path / "exam").exists()
    text = prepared.exam_bytes.decode("utf-8")
    for word in ("mule", "observatory", "airship", "oracle", "Sent: 21", "Roll ", "gives "):
        assert word in text, word


def test_exam_builder_does_not_import_toolkit() -> None:
    code = (
        "import sys, exam_builder.build, exam_builder.quality;"
        "bad = [m for m in sys.modules if m == 'toolkit' or m.startswith('toolkit.')];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def _sections(toml: str) -> dict[str, str]:
    """The `[[families]]` sections of a bank.toml text, by family name."""
    _head, *parts = toml.split("[[families]]")
    return {p.split('"')[1]: "[[families]]" + p for p in parts}


def test_a_bank_that_rewords_only_two_families_is_refused_naming_the_others(
    make_bank: MakeBank, tmp_path: Path, english: bytes
) -> None:
    """What the public engine answers is what a bundle of copied solvers would score."""
    head = HIDDEN_LIKE.split("[[families]]")[0]
    sections = _sections(HIDDEN_LIKE)
    reworded = {"passages", "records"}
    toml = head + "".join(
        sections[name] if name in reworded else f'[[families]]\nfamily = "{name}"\ncount = 6\n'
        for name in BUILTIN
    )
    bank = make_bank(toml)
    with pytest.raises(BuildError, match="public engine"):
        build_exam(bank, tmp_path / "exam", english_text=english)
    assert not (tmp_path / "exam").exists()
    [message] = [p for p in prepare_exam(bank, english_text=english).problems if "engine" in p]
    for name in BUILTIN:
        assert (f"{name} (100.0%" in message) == (name not in reworded), name
    assert "wording" in message  # says what to change


def test_the_public_engine_answers_the_public_banks_fully(
    demo_bank: Bank, demo_documents: list[GeneratedDocument]
) -> None:
    report = quality_report(demo_bank, demo_documents, None)
    assert report.public_bank and demo_bank.public
    assert all(fq.public_engine == 100.0 for fq in report.families.values())
    assert quality_problems(report) == []  # public on purpose: not gated
