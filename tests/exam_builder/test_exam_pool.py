"""The private solver pool (exam_builder.pool): solvers beside a hidden bank, run by the gate.

The tests' red-team pool (tests/exam_builder/pool: blind guessers and the structure reader of
issue 28) stands for a maintainer's hidden one. On every bank of the tests, the build refuses,
or every pool solver scores at most 5% per family.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from exam_helpers import DEMO, VALIDATION

from exam_builder.bank import BankError, bank_hash, load_bank
from exam_builder.build import BuildError, build_exam, prepare_exam
from exam_builder.pool import load_pool
from exam_builder.quality import GENERIC_LIMIT
from toolkit.cli import cli

HERE = Path(__file__).parent
POOL = HERE / "pool"
BANKS = sorted(p for p in (HERE / "banks").iterdir() if (p / "bank.toml").is_file())
STRUCTURED = HERE / "banks" / "structured"
READABLE = HERE / "banks" / "readable"


def _private(bank: Path, tmp_path: Path) -> Path:
    """A copy of `bank` that is not public (a public bank is never refused by these gates)."""
    copy = Path(shutil.copytree(bank, tmp_path / bank.name))
    toml = copy / "bank.toml"
    toml.write_text(toml.read_text().replace("public = true", "public = false"))
    return copy


def test_the_pool_loads_blind_guessers_and_the_structure_reader() -> None:
    pool = load_pool([POOL])
    assert {"blind-record", "blind-once", "reader-two-hop", "reader-count"} <= set(pool)
    assert len(pool) == 11


@pytest.mark.parametrize("bank", [*BANKS, DEMO, VALIDATION], ids=lambda p: p.name)
def test_every_bank_of_the_tests_is_refused_or_beats_the_pool(bank: Path, tmp_path: Path) -> None:
    prepared = prepare_exam(_private(bank, tmp_path), english_text=None, pool=[POOL])
    report = prepared.manifest.quality
    detail = report.pool_detail
    print(bank.name, {f: max(s.values()) for f, s in detail.items()}, report.chance_floor)
    if prepared.problems:
        return  # refused: the exam is never published
    for family, scores in detail.items():
        assert all(pct <= GENERIC_LIMIT for pct in scores.values()), (family, scores)


def test_the_structured_bank_passes_with_the_pool_and_the_readable_one_is_refused(
    tmp_path: Path,
) -> None:
    manifest = build_exam(
        STRUCTURED, tmp_path / "ok", english_text=None, allow_in_repo=True, pool=[POOL]
    )
    assert manifest.quality.pool_solvers == 11
    assert all(fq.pool is not None and fq.pool <= 5.0 for fq in manifest.quality.families.values())
    with pytest.raises(BuildError) as refused:
        build_exam(READABLE, tmp_path / "no", english_text=None, allow_in_repo=True, pool=[POOL])
    message = str(refused.value)
    for cracked in ("reader-two-hop answers mentors", "reader-count answers ledger"):
        assert cracked in message
    assert "reader-operation answers old_numeric" in message
    assert "reader-field answers old_extraction" in message
    assert "blind guesser scores on families mentors" in message


def test_the_manifest_keeps_no_pool_names(tmp_path: Path) -> None:
    build_exam(STRUCTURED, tmp_path / "exam", english_text=None, allow_in_repo=True, pool=[POOL])
    text = (tmp_path / "exam" / "manifest.json").read_text()
    for name in load_pool([POOL]):
        assert name not in text
    assert json.loads(text)["quality"]["pool_solvers"] == 11


def test_a_pool_beside_the_bank_is_run_and_left_out_of_its_hash(tmp_path: Path) -> None:
    bank = Path(shutil.copytree(STRUCTURED, tmp_path / "bank"))
    before = bank_hash(bank)
    (bank / "solvers").mkdir()
    # A pool solver that knows the family: it must crack it, and the gate must say so.
    (bank / "solvers" / "insider.py").write_text(
        "import re\n"
        "from exam_builder.solvers.base import Solver\n"
        "def guess(p):\n"
        "    m = re.search(r'Beads now held by (\\w+): $', p.context + p.question)\n"
        "    if not m:\n"
        "        return None\n"
        "    import importlib.util, pathlib\n"
        "    path = pathlib.Path(__file__).parents[1] / 'plugins' / 'ledger.py'\n"
        "    spec = importlib.util.spec_from_file_location('ledger_copy', path)\n"
        "    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)\n"
        "    return mod.solve(p.context + '\\n' + p.question, None)\n"
        "SOLVER = Solver('insider', 'the ledger family itself', guess)\n"
    )
    assert bank_hash(bank) == before == load_bank(bank).hash
    prepared = prepare_exam(bank, english_text=None)
    assert prepared.manifest.quality.pool_solvers == 1
    assert prepared.manifest.quality.families["ledger"].pool == 100.0
    assert any("insider answers ledger (100.0%)" in p for p in prepared.problems)


@pytest.mark.parametrize(
    ("source", "match"),
    [
        ("X = 1\n", r"define SOLVER = Solver\(name, structure, guess\)"),
        ("SOLVER = 'nope'\n", r"is not an exam_builder Solver"),
        ("raise RuntimeError('boom')\n", r"pool solver raised RuntimeError: boom"),
    ],
)
def test_a_bad_pool_file_is_one_line_naming_it(source: str, match: str, tmp_path: Path) -> None:
    folder = tmp_path / "pool"
    folder.mkdir()
    (folder / "bad.py").write_text(source)
    with pytest.raises(BankError, match=match) as bad:
        prepare_exam(STRUCTURED, english_text=None, pool=[folder])
    assert str(bad.value).startswith(str(folder / "bad.py")) and "\n" not in str(bad.value)


def test_a_crashing_pool_solver_stops_the_build_naming_it(tmp_path: Path) -> None:
    folder = tmp_path / "pool"
    folder.mkdir()
    (folder / "crash.py").write_text(
        "from exam_builder.solvers.base import Solver\n"
        "def guess(p):\n    raise RuntimeError('bug')\n"
        "SOLVERS = [Solver('crashy', 'nothing', guess)]\n"
    )
    with pytest.raises(BankError, match=r"pool solver crashy raised RuntimeError on mentors-"):
        prepare_exam(STRUCTURED, english_text=None, pool=[folder])
    (folder / "again.py").write_text((folder / "crash.py").read_text())
    with pytest.raises(BankError, match=r"solver name 'crashy' is used twice"):
        load_pool([folder])


def test_check_prints_chance_and_pool_and_refuses(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli,
        [
            "build-exam",
            "--bank",
            str(READABLE),
            "--check",
            "--pool",
            str(POOL),
            "--train-data",
            str(READABLE / "bank.toml"),
        ],
        terminal_width=250,
    )
    assert result.exit_code == 1, result.output
    assert "chance" in result.output and "pool" in result.output
    assert "the best of 11 private pool solvers" in result.output
    assert "reader-count answers ledger (100.0%)" in result.output
