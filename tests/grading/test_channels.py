"""Red-team: a hidden grading's published numbers carry no more than their documented bound.

Each attack is a bundle that encodes a secret choice (a stand-in for bits of the exam it was
just shown) in one published field: bits per byte steered through phase 2's rows, an exit
status or a signal, the batch it crashes in, the ablated pass count. For each, two bundles with
different secrets within one published step must publish byte-identical fields, and every value
published must be one of the field's documented values (`toolkit.grading.publish`;
`site/docs/security/channels.md` sums them). Timing (a bundle that sleeps) is published by the
run, not by the grading: `tests/run/test_channels_run.py`.
"""

from __future__ import annotations

import json

import pytest
from grading_helpers import ORACLE, MakeBundle, MakeExam, code_questions

from toolkit.grading import GradeReport, grade_bundle
from toolkit.grading.publish import (
    HIDDEN_REASONS,
    PHASE1_REASONS,
    bpb_values,
    coarse_ablation,
    coarse_bpb,
    coarse_seconds,
    hidden_reason,
)
from toolkit.grading.session import Category, Kind, Where
from toolkit.results.model import Score
from toolkit.tracks.model import GradingParams

# Phase 2 rows that give every printable byte the same probability 2**-cost and the rest of
# the mass to the other bytes: whatever the answer byte, it costs `cost` bits, so the bundle
# chooses its bits per byte (the 849.901), here `COST`, a stand-in for a secret.
STEERER = """
import numpy as np

COST = {cost!r}


class Steerer:
    def generate(self, prompts, lengths):
        return [b"?" * n for n in lengths]

    def next_byte_logprobs(self, contexts):
        printable = np.zeros(256, dtype=bool)
        printable[32:127] = True
        row = np.empty(256, dtype=np.float64)
        row[printable] = -COST * np.log(2.0)
        rest = 1.0 - printable.sum() * 2.0 ** -COST
        row[~printable] = np.log(rest / (~printable).sum())
        return np.tile(row, (len(contexts), 1)).astype(np.float32)


def load(bundle_dir, device):
    return Steerer()
"""

# Crashes with a chosen exit status (or signal) in a chosen batch of phase 1 or phase 2.
CRASHER = ORACLE.replace(
    "        def generate(self, prompts, lengths):\n",
    "        calls = 0\n"
    "        def generate(self, prompts, lengths):\n"
    "            Oracle.calls += 1\n"
    "            if {phase} == 1 and Oracle.calls == {batch}:\n"
    "                {crash}\n",
).replace(
    "        def next_byte_logprobs(self, contexts):\n",
    "        def next_byte_logprobs(self, contexts):\n"
    "            Oracle.calls += 1\n"
    "            if {phase} == 2 and Oracle.calls == {batch}:\n"
    "                {crash}\n",
)
EXIT = "import os; os._exit({})"
SIGNAL = "import os, signal; os.kill(os.getpid(), signal.{})"

# Passes every question, except in the ablated pass (its weights file is noise): there it
# answers only the first SECRET questions it is asked, so its ablated count is its secret.
ABLATION_SPLITTER = ORACLE.replace(
    "        def generate(self, prompts, lengths):\n",
    "        answered = 0\n"
    "        def generate(self, prompts, lengths):\n"
    "            import pathlib\n"
    "            ablated = pathlib.Path(__file__).with_name('w.bin').read_bytes() != b'W' * 64\n"
    "            if ablated:\n"
    "                out = []\n"
    "                for p, n in zip(prompts, lengths):\n"
    "                    Oracle.answered += 1\n"
    "                    ok = Oracle.answered <= {secret}\n"
    "                    found = re.findall(rb'code is (\\w+)', p) if ok else []\n"
    "                    out.append((found[0] if found else b'?')[:n].ljust(n, b'?'))\n"
    "                return out\n",
)


def published(report: GradeReport) -> str:
    """What a run copies from a grading into its result (`run.final_grading`)."""
    fields = {
        "ok": report.ok,
        "reason": report.reason if not report.ok else None,
        "score": report.score.model_dump(),
        "families": {k: v.model_dump() for k, v in report.families.items()},
        "bits_per_byte": report.bits_per_byte,
        "weights_ablation": report.weights_ablation and report.weights_ablation.model_dump(),
        "model_free_suspect": report.model_free_suspect,
    }
    return json.dumps(fields, sort_keys=True)


@pytest.fixture
def params(fast_params: GradingParams) -> GradingParams:
    return fast_params.model_copy(update={"batch_size": 2})


@pytest.mark.parametrize(
    "secrets",
    [(7.01, 7.09), (849.901, 849.5), (12.0, 31.7)],  # within one step; past the range
)
def test_a_bundle_cannot_steer_bits_per_byte_past_its_step(
    secrets: tuple[float, float],
    make_bundle: MakeBundle,
    make_exam: MakeExam,
    params: GradingParams,
) -> None:
    exam = make_exam(code_questions(4))
    reports = []
    for n, cost in enumerate(secrets):
        bundle = make_bundle(STEERER.format(cost=cost), name=f"b{n}")
        report = grade_bundle(bundle, exam, params=params)
        public = grade_bundle(bundle, exam, params=params, hidden=False)
        # The control: graded public, the bundle's choice shows in full.
        assert public.bits_per_byte == pytest.approx(cost, abs=1e-3)
        assert report.bits_per_byte in bpb_values(), report.bits_per_byte
        reports.append(published(report))
    assert reports[0] == reports[1]


@pytest.mark.parametrize(
    ("phase", "crashes"),
    [
        (1, [(EXIT.format(97), 1), (EXIT.format(3), 1), (SIGNAL.format("SIGSEGV"), 1)]),
        (1, [(EXIT.format(97), 1), (EXIT.format(97), 2), (SIGNAL.format("SIGTERM"), 2)]),
        (2, [(EXIT.format(97), 1), (EXIT.format(5), 3), (SIGNAL.format("SIGABRT"), 2)]),
    ],
)
def test_a_crash_publishes_no_status_signal_or_batch(
    phase: int,
    crashes: list[tuple[str, int]],
    make_bundle: MakeBundle,
    make_exam: MakeExam,
    params: GradingParams,
) -> None:
    exam = make_exam(code_questions(6))
    reports = []
    for n, (crash, batch) in enumerate(crashes):
        source = CRASHER.format(phase=phase, batch=batch, crash=crash)
        report = grade_bundle(make_bundle(source, name=f"b{n}"), exam, params=params)
        if phase == 1:
            assert not report.ok and report.reason in PHASE1_REASONS, report.reason
        else:
            assert report.ok and report.bits_per_byte is None
            reason = (report.bpb_reason or "").removeprefix("not available: ")
            assert reason in HIDDEN_REASONS, report.bpb_reason
        # (the score passed before a phase-1 crash is not published: a failed run scores 0)
        reports.append((report.reason, report.bpb_reason, report.ok, report.bits_per_byte))
    assert len(set(reports)) == 1, reports


def test_the_ablated_count_is_published_in_tenths_of_the_exam(
    make_bundle: MakeBundle, make_exam: MakeExam, params: GradingParams
) -> None:
    exam = make_exam(code_questions(20))  # a step of 2 questions
    reports = []
    for secret in (10, 11):
        source = ABLATION_SPLITTER.format(secret=secret)
        bundle = make_bundle(source, name=f"b{secret}", files={"w.bin": b"W" * 64})
        report = grade_bundle(bundle, exam, params=params, phases=("generate",), ablation=True)
        assert report.ok and report.score.passed == 20
        assert report.weights_ablation is not None and report.weights_ablation.passed == 10
        reports.append(published(report))
    assert reports[0] == reports[1]


def test_every_published_value_is_one_of_the_documented_ones() -> None:
    # bits per byte: 33 values, whatever the float (NaN, infinities, negatives included)
    for raw in (
        -1.0,
        0.0,
        0.124,
        0.126,
        3.3333,
        7.9,
        8.0,
        8.2,
        849.901,
        float("inf"),
        float("nan"),
    ):
        assert coarse_bpb(raw) in bpb_values(), raw
    assert len(bpb_values()) == 33 and coarse_bpb(None) is None
    # grading time: three buckets, whatever the seconds
    assert {coarse_seconds(s) for s in (0, 1.5, 59.9, 60, 61, 599, 600, 6000, 10**7)} == {
        0.0,
        60.0,
        600.0,
    }
    # the ablated count: at most 11 values for any exam size
    for total in (1, 4, 10, 20, 99, 100, 101, 1000):
        counts = {coarse_ablation(Score(percent=0.0, passed=0, total=total)).passed}
        for passed in range(total + 1):
            score = Score(percent=100.0 * passed / total, passed=passed, total=total)
            counts.add(coarse_ablation(score).passed)
        assert len(counts) <= 11, (total, sorted(counts))
    # reasons: every category, with any numbers, maps into the fixed list, with no digit in it
    for kind in Kind:
        numbers = tuple(range(97, 97 + kind.value.count("{")))
        for where in Where:
            batch = 7 if "{}" in where.value else None
            reason = hidden_reason(Category(kind, numbers, where, batch))
            assert reason in HIDDEN_REASONS and not any(ch.isdigit() for ch in reason)
    assert len(PHASE1_REASONS) <= 18 and len(HIDDEN_REASONS) <= 23
