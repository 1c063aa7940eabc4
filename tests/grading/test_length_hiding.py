"""Phase 1 tells the bundle one length for the whole exam, and honest scores do not move.

Before length hiding, phase 1 asked each question for its answer's own length (a rule solver
could use it: "the answer has 5 bytes"). Now every question is asked for `asked_length` (the
exam's longest answer, rounded up) and only the first len(answer) bytes are compared. A causal
model decoding greedily writes the same first bytes whatever it is asked for, so the starter
bundle and a rule-based bundle pass exactly the same questions both ways on the demo exam.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from grading_helpers import MakeBundle, MakeExam, TrainedStarter, code_questions

from exam_builder.exam_file import load_exam
from toolkit.grading import grade_bundle
from toolkit.grading.phases import ASKED_FLOOR, asked_length
from toolkit.run.inputs import DEMO_BANK, built_exam
from toolkit.tracks.model import GradingParams

# Rules for three demo families and the tier-1 register; the output is the guess, then newlines:
# the same first bytes whatever length is asked (as greedy decoding gives).
RULES = """
    import re

    def guess(prompt):
        text = prompt.decode("utf-8", "replace")
        asked = re.search(r"What does (\\w+) make\\? A: $", text)
        if asked:
            made = re.search(asked.group(1) + r" works as an? (\\w+) maker", text)
            return made.group(1) if made else ""
        doubled = re.search(r"\\n(\\w+) -> $", text)
        if doubled:
            return "".join(c + c for c in doubled.group(1))
        listed = re.search(r"List of the \\w+: ([^.]*)\\.\\n.*backwards: $", text)
        if listed:
            return ", ".join(reversed(listed.group(1).split(", ")))
        key = re.search(r"\\n[a-z]+ ([A-Z])$", text)  # a tier-1 register, default wording
        if key:
            value = r"((?:[a-z][^ \\w])+[a-z])(?= |\\n)"
            entry = re.search(r"(?:^| )" + key.group(1) + value, text, re.M)
            return re.sub(r"[^a-z]", "", entry.group(1)) if entry else ""
        return ""

    class Rules:
        def generate(self, prompts, lengths):
            return [(guess(p).encode() + b"\\n" * n)[:n] for p, n in zip(prompts, lengths)]

    def load(bundle_dir, device):
        return Rules()
"""


def _both_ways(bundle: Path, exam: Path) -> tuple[list[str], list[str]]:
    """Passed ids with the fixed length (now) and with each answer's length (before)."""
    hidden = grade_bundle(bundle, exam, phases=("generate",))
    exact = grade_bundle(bundle, exam, phases=("generate",), _exact_lengths=True)
    assert hidden.ok and exact.ok, (hidden.reason, exact.reason)
    assert hidden.problems == [] and exact.problems == []
    return hidden.passed_ids, exact.passed_ids


def test_a_rule_based_bundle_passes_the_same_questions_both_ways(
    make_bundle: MakeBundle,
) -> None:
    # The demo exam, and the built-in families as they were before they were made hard for
    # rules (1.1.0, kept as plug-ins of a public test bank): the rules read some of each.
    old_shapes = Path(__file__).parents[1] / "exam_builder" / "banks" / "old_shapes"
    passed = 0
    bundle = make_bundle(RULES)
    for exam in (built_exam(DEMO_BANK, "demo"), built_exam(old_shapes, "old-shapes")):
        now, before = _both_ways(bundle, exam)
        assert now == before
        passed += len(now)
    assert passed >= 40  # the rules solve whole families: the comparison means something


@pytest.mark.slow
def test_the_starter_bundle_passes_the_same_questions_both_ways(
    trained_starter: TrainedStarter,
) -> None:
    bundle, exam, _ = trained_starter
    now, before = _both_ways(bundle, exam)
    assert now == before


@pytest.mark.slow
def test_the_starter_writes_the_same_first_bytes_whatever_length_it_is_asked(
    trained_starter: TrainedStarter,
) -> None:
    # The claim beneath the test above, byte by byte: a minute of training passes few or no
    # demo questions, so equal passed sets alone could be two empty ones.
    bundle, exam, _ = trained_starter
    spec = importlib.util.spec_from_file_location(
        "starter_bundle_both_ways", bundle / "inference.py"
    )
    assert spec is not None and spec.loader is not None
    inference = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(inference)
    model = inference.load(str(bundle), "cpu")
    questions = load_exam(exam)
    asked = asked_length(questions)
    batch = GradingParams().batch_size
    compared = 0
    for start in range(0, len(questions), batch):
        part = questions[start : start + batch]
        prompts = [q.prompt.encode() for q in part]
        exact = [len(q.answer.encode()) for q in part]
        long = model.generate(prompts, [asked] * len(part))
        short = model.generate(prompts, exact)
        assert [len(out) for out in long] == [asked] * len(part)
        for q, wrote, wrote_exact, size in zip(part, long, short, exact, strict=True):
            assert wrote[:size] == wrote_exact, (q.id, wrote[:size], wrote_exact)
            compared += size
    assert compared == sum(len(q.answer.encode()) for q in questions) > 0


def test_the_asked_length_is_the_exams_not_the_answers(make_exam: MakeExam) -> None:
    demo = load_exam(built_exam(DEMO_BANK, "demo"))
    longest = max(len(q.answer.encode()) for q in demo)
    assert asked_length(demo) % 16 == 0 and longest <= asked_length(demo) < longest + 16
    short = load_exam(make_exam(code_questions(3)))
    assert asked_length(short) == ASKED_FLOOR


def test_an_output_of_the_answers_length_is_now_the_wrong_length(
    make_bundle: MakeBundle, make_exam: MakeExam, fast_params: GradingParams
) -> None:
    # A bundle that ignores what it is asked and returns the answer's length: a problem on
    # each question (and the length it gave says nothing it was told).
    source = """
        import re
        class M:
            def generate(self, prompts, lengths):
                return [re.findall(rb"code is (\\w+)", p)[0] for p in prompts]
        def load(bundle_dir, device):
            return M()
    """
    exam = make_exam(code_questions(3))
    report = grade_bundle(make_bundle(source), exam, params=fast_params, phases=("generate",))
    assert report.score.passed == 0
    assert report.problems == [f"extraction-{i}: wrong length" for i in range(3)]
    old = grade_bundle(
        make_bundle(source, name="b2"),
        exam,
        params=fast_params,
        phases=("generate",),
        _exact_lengths=True,
    )
    assert old.score.passed == 3
