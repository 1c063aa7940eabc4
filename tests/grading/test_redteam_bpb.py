"""Red-team: bits per byte must measure prediction, not reading ahead.

Phase 2 sends every context of a batch in one request: for each answer byte k, the prompt plus
`answer[:k]`. So the context of byte k+1 already holds byte k: a bundle with no model at all
can put all its mass on the byte that the next context shows, and pays only for the last byte
of each answer. Its bits per byte then says "a strong model" where there is none.
"""

from __future__ import annotations

from grading_helpers import MakeBundle, MakeExam, code_questions

from toolkit.grading import grade_bundle
from toolkit.tracks.model import GradingParams

# Knows nothing: uniform rows, except where another context of the same request shows the
# byte that comes next (that context is this one plus one byte, cut to the same window).
PEEKER = """
import numpy as np


class Peeker:
    def generate(self, prompts, lengths):
        return [b"?" * n for n in lengths]

    def next_byte_logprobs(self, contexts):
        rows = np.full((len(contexts), 256), -np.log(256.0))
        for i, c in enumerate(contexts):
            for d in contexts:
                if len(d) and (d[:-1] == c or d[:-1] == c[1:]) and d != c:
                    p = np.full(256, 1e-9)
                    p[d[-1]] = 1.0 - 255e-9
                    rows[i] = np.log(p)
                    break
        return rows


def load(bundle_dir, device):
    return Peeker()
"""


def test_bpb_cannot_be_lowered_by_reading_later_contexts(
    make_bundle: MakeBundle, make_exam: MakeExam, fast_params: GradingParams
) -> None:
    exam = make_exam(code_questions(4))
    report = grade_bundle(make_bundle(PEEKER), exam, params=fast_params)
    assert report.ok and report.score.passed == 0  # it answers nothing: no model
    # A bundle with no model predicts no byte better than uniform: 8 bits per byte (or none).
    assert report.bits_per_byte is None or report.bits_per_byte > 7.5, (
        f"a bundle without a model got {report.bits_per_byte:.3f} bits per byte"
    )
