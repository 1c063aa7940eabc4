"""Refusals that name the cause (issue 51 item 2): a hidden bank that keeps the tier-1
register's default wording is refused naming the solver, the tier and the bank.toml table
that leaks; a hidden bank's short seed is one warning line before any work."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from exam_helpers import SYLLABLES, MakeBank

from exam_builder.bank import load_bank, weak_seed
from exam_builder.build import BuildError, build_exam
from toolkit.cli import cli

LONG_SEED = "3a9c51e07bd24f68a1c0e9d8b7a6f5e4d3c2b1a09f8e7d6c5b4a39281706f5e4"


def _records_bank(make_bank: MakeBank, seed: str = LONG_SEED) -> Path:
    """Records reworded in its own tier, its tier-1 register in the public default wording."""
    return make_bank(
        f"""
        id = "leaky"
        seed = "{seed}"
        syllables = {SYLLABLES}

        [[families]]
        family = "records"
        count = 20
        [families.params]
        tiers = {{1 = 1, 2 = 1}}
        rows = 7
        groups = ["observatory"]
        columns = [
          {{name = "comet", kind = "name"}},
          {{name = "orbit", kind = "number", low = 1000, high = 9999}},
          {{name = "seal", kind = "code"}},
        ]
        [families.params.phrases]
        forward = "{{row}} and {{other}} show, in {{key}}'s {{value}} place: "
        reverse = "Whose are {{value}} and {{other}}? "
        """
    )


def test_the_public_engine_refusal_names_solver_tier_and_table(
    make_bank: MakeBank, tmp_path: Path
) -> None:
    with pytest.raises(BuildError) as info:
        build_exam(_records_bank(make_bank), tmp_path / "exam", english_text=None)
    message = str(info.value)
    assert "tier 1: the public records solver answers" in message, message
    assert "default wording of [families.params.lookup.phrases]" in message, message
    assert "tier 2:" not in message, message  # the reworded tier does not leak


def test_a_short_seed_of_a_hidden_bank_is_one_warning_line(make_bank: MakeBank) -> None:
    weak = load_bank(_records_bank(make_bank, seed="abc"))
    reason = weak_seed(weak)
    assert reason is not None and "3 characters" in reason and "\n" not in reason
    done = CliRunner().invoke(cli, ["build-exam", "--bank", str(weak.path), "--check"])
    first = done.output.splitlines()[0]  # said first, before the report
    assert first.startswith("warning: ") and "seed has 3 characters" in first, done.output


def test_a_long_random_seed_or_a_public_bank_is_not_warned(make_bank: MakeBank) -> None:
    assert weak_seed(load_bank(_records_bank(make_bank))) is None
    demo = Path(__file__).resolve().parents[2] / "exam_builder" / "banks" / "public" / "demo"
    assert weak_seed(load_bank(demo)) is None
