"""A spy bundle logs every byte it is given; the log proves what the grader withholds.

The spy appends to a file inside its own bundle folder (the one place a sandboxed worker may
write that the test can read afterwards: `workdir` keeps the per-phase sandboxes).
"""

from __future__ import annotations

import json
from pathlib import Path

from grading_helpers import MakeBundle, MakeExam

from exam_builder.exam_file import load_exam
from toolkit.grading import grade_bundle
from toolkit.grading.phases import asked_length
from toolkit.tracks.model import GradingParams

SPY = """
    import base64, json, os, sys, time
    HERE = os.path.dirname(os.path.abspath(__file__))
    TOKEN = os.urandom(8).hex()  # differs in every worker process

    def record(kind, items):
        with open(os.path.join(HERE, "spy.jsonl"), "a") as log:
            for item in items:
                data = item if isinstance(item, bytes) else str(item).encode()
                log.write(json.dumps({"t": time.time(), "token": TOKEN, "kind": kind,
                                      "data": base64.b64encode(data).decode()}) + "\\n")

    class Spy:
        def generate(self, prompts, lengths):
            record("prompt", prompts)
            record("length", lengths)
            return [b"?" * n for n in lengths]

        def next_byte_logprobs(self, contexts):
            import numpy as np
            record("context", contexts)
            return np.full((len(contexts), 256), -np.log(256.0), dtype=np.float32)

    def load(bundle_dir, device):
        record("argv", sys.argv)
        record("env", [f"{k}={v}" for k, v in os.environ.items()])
        record("stdin", [os.read(0, 1 << 16) if hasattr(os, "read") else b""])
        return Spy()
"""


def _read_log(path: Path) -> list[dict[str, object]]:
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    import base64

    for entry in entries:
        entry["data"] = base64.b64decode(str(entry["data"]))
    return entries


def _exam() -> list[dict[str, str]]:
    """Three questions of one document: later prompts hold earlier answers masked."""
    long_intro = "Filler sentence about nothing in particular. " * 40  # > 1,024 bytes
    return [
        {
            "id": "d1-1",
            "family": "passages",
            "prompt": long_intro + "First key: ",
            "answer": "ZQXAPPLE",
        },
        {
            "id": "d1-2",
            "family": "passages",
            "prompt": long_intro + "First key: ____ . Second key: ",
            "answer": "ZQXBERRY",
        },
        {
            "id": "d1-3",
            "family": "passages",
            "prompt": "First key: ____ . Second key: ____ . Third: ",
            "answer": "ZQXCHERRY",
        },
    ]


def test_spy_sees_no_answer_byte_before_phase_1_is_over(
    make_bundle: MakeBundle, make_exam: MakeExam, tmp_path: Path
) -> None:
    questions = _exam()
    work = tmp_path / "work"
    params = GradingParams(batch_size=2)
    exam = make_exam(questions)
    report = grade_bundle(make_bundle(SPY), exam, params=params, workdir=work)
    assert report.ok and report.score.passed == 0 and report.bits_per_byte is not None

    phase1 = _read_log(work / "phase1" / "bundle" / "spy.jsonl")
    phase2 = _read_log(work / "phase2" / "bundle" / "spy.jsonl")
    answers = [q["answer"].encode() for q in questions]
    prompts = [q["prompt"].encode()[-1024:] for q in questions]

    # Phase 1: exactly the truncated prompts and the lengths; no answer byte sequence anywhere.
    received = sorted(e["data"] for e in phase1 if e["kind"] == "prompt")
    assert received == sorted(prompts)
    assert all(len(p) <= 1024 for p in received)
    # One length for every question, the exam's (longest answer rounded up): none's own.
    lengths = [int(e["data"]) for e in phase1 if e["kind"] == "length"]  # type: ignore[call-overload]
    assert lengths == [asked_length(load_exam(exam))] * len(answers)
    assert asked_length(load_exam(exam)) not in {len(a) for a in answers}
    blob = b"".join(e["data"] for e in phase1)  # type: ignore[misc]
    for answer in answers:
        assert answer not in blob
        assert answer[:5] not in blob  # not even a prefix beyond the shared "ZQX"
    env = [e["data"] for e in phase1 if e["kind"] == "env"]
    assert env and not any(b"ARI_GRADER_NONCE" in v for v in env)  # type: ignore[operator]

    # Phase 2 runs in a fresh process, only after phase 1 ended.
    assert {e["token"] for e in phase1}.isdisjoint({e["token"] for e in phase2})
    assert max(float(e["t"]) for e in phase1) < min(float(e["t"]) for e in phase2)  # type: ignore[arg-type]

    # Phase 2: each context is prompt + the answer bytes *before* the scored one, truncated;
    # no context holds a whole answer, and none holds another question's answer.
    contexts = [e["data"] for e in phase2 if e["kind"] == "context"]
    expected = [
        (q["prompt"].encode() + a[:k])[-1024:]
        for q, a in zip(questions, answers, strict=True)
        for k in range(len(a))
    ]
    assert sorted(contexts) == sorted(expected)  # type: ignore[type-var]
    for context in contexts:
        assert isinstance(context, bytes)
        assert not any(answer in context for answer in answers)
