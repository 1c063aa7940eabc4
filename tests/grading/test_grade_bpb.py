"""Bits per byte cannot be faked: rows that are not log-probabilities over 256 bytes are refused.

Each bundle answers phase 2 with rows of one wrong kind; bits per byte is then "not available"
with the reason, and phase 1 (the score) is unaffected.
"""

from __future__ import annotations

import pytest
from grading_helpers import ORACLE, MakeBundle, MakeExam, code_questions

from toolkit.grading import grade_bundle
from toolkit.tracks.model import GradingParams

ROWS = {
    "zeros": "np.zeros((n, 256))",
    "plus_inf": "np.where(np.arange(256) == 7, np.inf, -np.log(256.0)) + np.zeros((n, 1))",
    "minus_inf": "np.where(np.arange(256) == 7, -np.inf, -np.log(255.0)) + np.zeros((n, 1))",
    "nan": "np.where(np.arange(256) == 7, np.nan, -np.log(256.0)) + np.zeros((n, 1))",
    "sum_two": "np.full((n, 256), np.log(2.0 / 256))",
    "probabilities": "np.full((n, 256), 1.0 / 256)",
    "huge_negative": "np.full((n, 256), -1e30)",
    "transposed": "np.full((256, n), -np.log(256.0))",
    "flat": "np.full(n * 256, -np.log(256.0))",
    "one_row_short": "np.full((n - 1, 256), -np.log(256.0))",
    "strings": "[['x'] * 256] * n",
}


def _bundle(rows: str) -> str:
    return ORACLE.replace(
        "            return np.full((len(contexts), 256), -np.log(256.0), dtype=np.float32)",
        f"            n = len(contexts)\n            return {rows}",
    )


@pytest.mark.parametrize("kind", sorted(ROWS))
def test_rows_that_are_not_log_probabilities_give_no_bpb(
    kind: str, make_bundle: MakeBundle, make_exam: MakeExam, fast_params: GradingParams
) -> None:
    exam = make_exam(code_questions(3))
    report = grade_bundle(make_bundle(_bundle(ROWS[kind])), exam, params=fast_params)
    assert report.ok and report.score.passed == 3, report.reason  # phase 1 stands
    assert report.bits_per_byte is None, f"{kind} rows gave bpb {report.bits_per_byte}"
    assert report.bpb_reason and report.bpb_reason.startswith("not available:"), report.bpb_reason


def test_right_values_in_another_dtype_are_accepted(
    make_bundle: MakeBundle, make_exam: MakeExam, fast_params: GradingParams
) -> None:
    # float64 (or a list of lists) of true log-probabilities: the worker sends float32.
    for rows in ("np.full((n, 256), -np.log(256.0))", "[[-float(np.log(256.0))] * 256] * n"):
        bundle = make_bundle(_bundle(rows), name=f"b{len(rows)}")
        report = grade_bundle(bundle, make_exam(code_questions(2), name=f"e{len(rows)}"))
        assert report.bits_per_byte is not None and abs(report.bits_per_byte - 8.0) < 1e-4


def test_a_peaked_distribution_is_a_valid_row(
    make_bundle: MakeBundle, make_exam: MakeExam, fast_params: GradingParams
) -> None:
    # Nearly all mass on one byte: its log-probability rounds to 0.0 in float32; still valid.
    rows = (
        "np.log(np.where(np.arange(256) == 75, 1 - 255e-12, 1e-12) + np.zeros((n, 1)))"
        ".astype(np.float32)"
    )
    report = grade_bundle(make_bundle(_bundle(rows)), make_exam(code_questions(2)))
    assert report.bits_per_byte is not None, report.bpb_reason
