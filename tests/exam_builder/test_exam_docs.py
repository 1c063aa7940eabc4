"""The maintainers' page documents every built-in family and every one of its parameters."""

from __future__ import annotations

import pytest
from exam_helpers import REPO

from exam_builder.bank import Bank, BankFile
from exam_builder.document import MASK
from exam_builder.families import BUILTIN
from exam_builder.generate import generate_documents
from exam_builder.quality import quality_report
from exam_builder.solvers import GENERIC

PAGE = REPO / "site" / "docs" / "maintainers" / "exams.md"


@pytest.mark.parametrize("family", list(BUILTIN))
def test_every_family_and_parameter_is_documented(family: str) -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert f"| `{family}` |" in text
    row = next(line for line in text.splitlines() if line.startswith(f"| `{family}` |"))
    for name in BUILTIN[family].params.model_fields:
        if name not in ("questions", "tiers"):  # common to all, documented once
            assert f"`{name}`" in row, f"{family}.{name} is not documented"


@pytest.mark.parametrize("family", list(BUILTIN))
def test_every_phrase_is_documented_with_its_default(family: str) -> None:
    text = PAGE.read_text(encoding="utf-8")
    field = BUILTIN[family].params.model_fields.get("phrases")
    if field is None or field.default_factory is None:
        return
    phrases = field.default_factory()  # type: ignore[call-arg]
    for name in phrases.SLOTS:
        assert f"`{name}`: `{getattr(phrases, name)}`" in text, f"{family}.phrases.{name}"


def test_bank_fields_and_mask_are_documented() -> None:
    text = PAGE.read_text(encoding="utf-8")
    for name in BankFile.model_fields:
        assert f"`{name}`" in text
    assert MASK in text and "`questions`" in text


def test_the_demo_banks_generic_table_is_current(demo_bank: Bank) -> None:
    """The maintainers' page shows the generic solvers on the demo bank: the numbers the
    engine gives today, one row per solver."""
    text = PAGE.read_text(encoding="utf-8")
    report = quality_report(demo_bank, generate_documents(demo_bank), None)
    assert list(report.generic_solvers) == list(GENERIC)
    for solver in GENERIC:
        cells = [f"{fq.generic[solver]:.1f}" for fq in report.families.values()]
        assert f"| `{solver}` | " + " | ".join(cells) + " |" in text, solver
        assert f"| `{solver}` | " in text.split("How to read the tables")[0], solver
