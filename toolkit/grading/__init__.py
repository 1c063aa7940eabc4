"""Grading: pack a bundle, run it in a sandbox, score it on an exam (DESIGN §4).

Example::

    from toolkit.grading import grade_bundle, pack_bundle
    report = grade_bundle(Path("bundles/b1"), Path("exam/exam.jsonl"))
    print(report.score.percent, report.bits_per_byte, report.reason)
"""

from toolkit.grading.grade import SIZE_LIMIT_BYTES, grade_bundle
from toolkit.grading.pack import BundleError, PackedBundle, extract_bundle, pack_bundle
from toolkit.grading.report import GradeReport, Timings

__all__ = [
    "SIZE_LIMIT_BYTES",
    "BundleError",
    "GradeReport",
    "PackedBundle",
    "Timings",
    "extract_bundle",
    "grade_bundle",
    "pack_bundle",
]
