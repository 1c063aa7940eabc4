"""Malformed banks fail with one line that names the file and the field."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from exam_helpers import SYLLABLES, MakeBank

from exam_builder.bank import BankError, load_bank
from exam_builder.build import build_exam
from toolkit.cli import cli

HEAD = f'id = "t"\nseed = "s"\nsyllables = {SYLLABLES}\n'


def _error(bank: Path, tmp_path: Path) -> str:
    with pytest.raises(BankError) as info:
        build_exam(bank, tmp_path / "out", english_text=None)
    message = str(info.value)
    assert "\n" not in message
    assert str(bank / "bank.toml") in message or str(bank / "plugins") in message
    assert not (tmp_path / "out").exists()
    return message


@pytest.mark.parametrize(
    ("toml", "field"),
    [
        ('id = "t"\nsyllables = []\n[[families]]\nfamily = "lists"\ncount = 1\n', "seed"),
        (HEAD + '[[families]]\nfamily = "lists"\n', "families[0].count: Field required"),
        (HEAD + '[[families]]\nfamily = "lists"\ncount = "many"\n', "families[0].count"),
        (HEAD + '[[families]]\nfamily = "lists"\ncount = 2\ncolour = 1\n', "families[0].colour"),
        (HEAD.replace('"ka"', "7"), "syllables[0]"),
        (HEAD.replace('"ka"', '"Ka!"'), "syllables: syllables must be 2-4 lowercase"),
        (HEAD + "families = []\n", "families: List should have at least 1 item"),
        ('id = "T T"\n', "id:"),
        (HEAD + "[[families]\n", "not valid TOML"),
    ],
)
def test_bad_field(make_bank: MakeBank, tmp_path: Path, toml: str, field: str) -> None:
    assert field in _error(make_bank(toml), tmp_path)


def test_unknown_family(make_bank: MakeBank, tmp_path: Path) -> None:
    message = _error(make_bank(HEAD + '[[families]]\nfamily = "riddles"\ncount = 3\n'), tmp_path)
    assert "families[0].family: unknown family 'riddles'" in message
    assert "known: passages, records" in message


def test_family_listed_twice(make_bank: MakeBank, tmp_path: Path) -> None:
    entry = '[[families]]\nfamily = "lists"\ncount = 3\n'
    assert "families[1].family: 'lists' is listed twice" in _error(
        make_bank(HEAD + entry + entry), tmp_path
    )


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ("rows = 2", "families[0].params.rows: Input should be greater than or equal to 3"),
        ('rows = "six"', "families[0].params.rows: Input should be a valid integer"),
        ("colums = []", "families[0].params.colums: Extra inputs are not permitted"),
        (
            'columns = [{name = "age", kind = "colour"}]',
            "families[0].params.columns[0].kind",
        ),
        (
            'phrases = {forward = "The {row} of it is "}',
            "params.phrases: forward: 'The {row} of it is ' must use {key}, {value}, {row}, "
            "{other}",
        ),
        ('phrases = {reverse = "{column} {row}"}', "phrases: reverse:"),
        ('phrases = {title = "Register {place:>9} {group}"}', "slots are plain {names}"),
    ],
)
def test_bad_family_params(make_bank: MakeBank, tmp_path: Path, params: str, field: str) -> None:
    toml = HEAD + f'[[families]]\nfamily = "records"\ncount = 3\n[families.params]\n{params}\n'
    assert field in _error(make_bank(toml), tmp_path)


def test_missing_bank_file(tmp_path: Path) -> None:
    with pytest.raises(BankError, match=r"bank\.toml: not found"):
        load_bank(tmp_path)


PLUGIN_OK = """
    from exam_builder.document import Document
    from exam_builder.families.base import Family, Params

    def generate(rng, params, lexicon):
        {body}

    FAMILY = Family("broken", Params, generate, lambda prompt, params: "x")
"""


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("raise RuntimeError('boom at import')", "plug-in plugins/bad.py raised RuntimeError"),
        ("FAMILY = 3", "plugins/bad.py: FAMILY: must be an exam_builder.families.base.Family"),
        ("x = 1", "plugins/bad.py: FAMILY: must be"),
        ("import nosuchmodule_xyz", "raised ModuleNotFoundError"),
        (
            PLUGIN_OK.replace('"broken"', '"lists"').replace("{body}", "pass"),
            "FAMILY.name: 'lists' is a built-in family",
        ),
    ],
)
def test_plugin_that_fails_to_load(
    make_bank: MakeBank, tmp_path: Path, source: str, expected: str
) -> None:
    bank = make_bank(HEAD + '[[families]]\nfamily = "lists"\ncount = 3\n', {"bad.py": source})
    assert expected in _error(bank, tmp_path)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("raise KeyError('no such table')", "generate raised KeyError"),
        ("return 'a string'", "generate must return a Document"),
        ("return Document()", "generate must return a Document with an answer"),
    ],
)
def test_plugin_family_that_raises(
    make_bank: MakeBank, tmp_path: Path, body: str, expected: str
) -> None:
    bank = make_bank(
        HEAD + '[[families]]\nfamily = "lists"\ncount = 2\n'
        '[[families]]\nfamily = "broken"\ncount = 2\n',
        {"broken.py": PLUGIN_OK.replace("{body}", body)},
    )
    message = _error(bank, tmp_path)
    assert "families[1] (broken, plug-in plugins/broken.py)" in message
    assert expected in message


def test_plugin_solver_that_raises(make_bank: MakeBank, tmp_path: Path) -> None:
    source = PLUGIN_OK.replace(
        "{body}", "d = Document()\n        d.say('q: ')\n        d.ask('a')\n        return d"
    ).replace('lambda prompt, params: "x"', "lambda prompt, params: 1 / 0")
    bank = make_bank(HEAD + '[[families]]\nfamily = "broken"\ncount = 2\n', {"broken.py": source})
    message = _error(bank, tmp_path)
    assert "solve raised ZeroDivisionError on broken-0000-0" in message


def test_cli_prints_one_line_and_exits_1(make_bank: MakeBank, tmp_path: Path) -> None:
    bank = make_bank(HEAD + '[[families]]\nfamily = "lists"\ncount = "x"\n')
    result = CliRunner().invoke(
        cli,
        [
            "build-exam",
            "--bank",
            str(bank),
            "--out",
            str(tmp_path / "o"),
            "--train-data",
            str(bank / "bank.toml"),
        ],
    )
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "families[0].count" in lines[0]
