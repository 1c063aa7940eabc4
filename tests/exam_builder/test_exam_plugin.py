"""A bank can add its own family from a Python file in `plugins/`."""

from __future__ import annotations

from pathlib import Path

import pytest
from exam_helpers import SYLLABLES, MakeBank

from exam_builder.bank import BankError, load_bank
from exam_builder.build import build_exam
from exam_builder.exam_file import load_exam

PLUGIN = '''
"""Colours: invented creatures and their colours, with a bank-set number of creatures."""

import re

from pydantic import Field

from exam_builder.document import Document
from exam_builder.families.base import Family, Params, last_line


class ColoursParams(Params):
    creatures: int = Field(default=3, ge=1)


def generate(rng, params, lexicon):
    doc = Document()
    pairs = [(lexicon.name(), lexicon.word()) for _ in range(params.creatures)]
    for name, colour in pairs:
        doc.say(f"{name} is {colour}-coloured. ")
    doc.say("\\n")
    for name, colour in rng.sample(pairs, min(params.questions, len(pairs))):
        doc.say(f"The colour of {name}: ")
        doc.ask(colour)
        doc.say("\\n")
    return doc


def solve(prompt, params):
    name = re.fullmatch(r"The colour of (\\w+): ", last_line(prompt)).group(1)
    return re.search(rf"{name} is (\\w+)-coloured", prompt).group(1)


FAMILY = Family("colours", ColoursParams, generate, solve, "creature colours")
'''


def test_plugin_family_builds(make_bank: MakeBank, tmp_path: Path, english: bytes) -> None:
    bank = make_bank(
        # The built-in family keeps its default wording: a public bank (see the quality gate).
        f'id = "plug"\npublic = true\nseed = "secret"\nsyllables = {SYLLABLES}\n'
        '[[families]]\nfamily = "lists"\ncount = 4\n'
        '[[families]]\nfamily = "colours"\ncount = 7\n'
        "[families.params]\ncreatures = 4\nquestions = 2\n",
        {"colours.py": PLUGIN},
    )
    loaded = load_bank(bank)
    assert [f.family.name for f in loaded.families] == ["lists", "colours"]
    assert loaded.families[1].source == "plugins/colours.py"
    manifest = build_exam(bank, tmp_path / "out", english_text=english)
    assert manifest.families == {"lists": 4, "colours": 7}
    assert manifest.quality.families["colours"].reference == 100.0
    questions = load_exam(tmp_path / "out")
    colours = [q for q in questions if q.family == "colours"]
    assert len(colours) == 7
    assert colours[0].id == "colours-0000-0" and colours[2].id == "colours-0001-0"  # 2 per doc
    assert colours[1].prompt.count("▒▒▒") == 1


def test_plugin_params_are_validated(make_bank: MakeBank, tmp_path: Path) -> None:
    bank = make_bank(
        f'id = "plug"\nseed = "s"\nsyllables = {SYLLABLES}\n'
        '[[families]]\nfamily = "colours"\ncount = 2\n[families.params]\ncreatures = 0\n',
        {"colours.py": PLUGIN},
    )
    with pytest.raises(BankError, match=r"families\[0\]\.params\.creatures"):
        load_bank(bank)
