"""Issue 28, part 3: the built-in families leave a blind guesser and the structure reader
nothing to read. Every built-in family's chance floor is under the gate's limit, and the tests'
red-team pool (tests/exam_builder/pool: blind guessers and the structure reader) scores at most
5% per family on the demo exam and the public validation set.

Each check is also run on the families as they were before (tests/exam_builder/banks/old_shapes,
the 1.1.0 modules as plug-ins): there it must fail for every family, so a family reverted to
its old shape fails these tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from exam_helpers import DEMO, SYLLABLES, VALIDATION, MakeBank

from exam_builder.build import prepare_exam
from exam_builder.chance import CHANCE_LIMIT
from exam_builder.families import BUILTIN
from exam_builder.quality import GENERIC_LIMIT, QualityReport

HERE = Path(__file__).parent
POOL = HERE / "pool"
OLD_SHAPES = HERE / "banks" / "old_shapes"


def over_the_floor(report: QualityReport) -> dict[str, str]:
    """The families a blind guesser or a pool solver scores on, with what it scores."""
    out: dict[str, str] = {}
    for name, fq in report.families.items():
        found = []
        if fq.chance is None or fq.chance > CHANCE_LIMIT:
            found.append(f"chance {fq.chance}% by {fq.chance_strategy}")
        worst = max(report.pool_detail.get(name, {}).items(), key=lambda kv: kv[1], default=None)
        if worst is None:
            found.append("the pool did not run")
        elif worst[1] > GENERIC_LIMIT:
            found.append(f"{worst[0]} scores {worst[1]}%")
        if found:
            out[name] = "; ".join(found)
    return out


@pytest.mark.parametrize("family", list(BUILTIN))
def test_every_builtin_family_is_under_the_chance_limit_and_beats_the_pool(
    family: str, make_bank: MakeBank
) -> None:
    """150 questions of the family with its defaults, a seed of its own: the floor is the
    family's, not one lucky exam's."""
    bank = make_bank(
        f'id = "floor-{family}"\npublic = true\nseed = "floor of {family}"\n'
        f"syllables = {SYLLABLES}\n"
        f'[[families]]\nfamily = "{family}"\ncount = 150\n'
    )
    report = prepare_exam(bank, english_text=None, pool=[POOL]).manifest.quality
    assert report.families[family].reference == 100.0
    assert over_the_floor(report) == {}


@pytest.mark.parametrize("bank", [DEMO, VALIDATION], ids=lambda p: p.name)
def test_the_public_exams_are_under_the_floor_for_the_pool(bank: Path) -> None:
    """The pool on the whole exam, and the chance floor on the families' own tiers: their tier
    1 is the public register, which the blind 'joined' pick reads one time in six or seven
    (a public bank shows its layout: test_exam_chance.py)."""
    report = prepare_exam(bank, english_text=None, pool=[POOL]).manifest.quality
    assert report.pool_solvers == 11
    over = over_the_floor(report)
    assert all("by joined" in why and "scores" not in why for why in over.values()), over
    for name, fq in report.families.items():
        own = [tq for tier, tq in (fq.tiers or {}).items() if tier != 1]
        assert own and all(tq.chance is not None and tq.chance <= CHANCE_LIMIT for tq in own), name


def test_the_old_shapes_fail_every_check() -> None:
    """The same checks on the 1.1.0 families: every one of them is caught (a blind pick among
    the prompt's values, or a rule of the structure reader), so reverting a family fails the
    tests above."""
    report = prepare_exam(OLD_SHAPES, english_text=None, pool=[POOL]).manifest.quality
    caught = over_the_floor(report)
    print(caught)
    assert sorted(caught) == sorted(report.families), caught
    # The rules of issue 28 that read them: operation words, cue-word fields, start + minutes.
    assert "reader-operation" in caught["old_numeric"]
    assert "reader-field" in caught["old_extraction"] or "chance" in caught["old_extraction"]
    assert "chance" in caught["old_records"] and "chance" in caught["old_passages"]
