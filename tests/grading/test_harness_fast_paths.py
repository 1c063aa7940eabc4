"""The faster reply checks (benchmarks/bench_harness.py) give the same verdicts as before.

`logprob_problem` accepts in one pass and explains in detail only on failure: on rows built
to sit on every edge of its checks, it must say exactly what the row-by-row check says.
`logprob_rows` decodes with the strict base64 decoder directly: every malformed text is still
refused. Phase 2 cuts each context from the question's whole text once: the same bytes as
before. The session writes a request before waiting on the pipe: a worker that stops reading
still times out, and one that died is still a crash.
"""

from __future__ import annotations

import base64
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from exam_builder.exam_file import Question
from toolkit.grading import phases, replies
from toolkit.grading.session import WorkerFailure, WorkerSession, WorkerTimeout
from toolkit.sandbox import create_sandbox
from toolkit.tracks import GradingParams

TOL = replies.LOGPROB_TOLERANCE


def _uniform(n: int = 4) -> np.ndarray:
    return np.full((n, 256), -math.log(256.0), dtype=np.float32)


def _edge_cases() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    cases = [_uniform()]
    for value in (np.nan, np.inf, -np.inf, np.finfo(np.float32).max, -np.finfo(np.float32).max):
        for row in (0, 3):
            rows = _uniform()
            rows[row, 17] = value
            cases.append(rows)
    for shift in (0.5 * TOL, 0.99 * TOL, 1.01 * TOL, 2 * TOL, -1.01 * TOL, -0.5 * TOL):
        cases.append(_uniform() + np.float32(shift))  # normalisation just inside / outside
    peaked = np.full((2, 256), -1e4, dtype=np.float32)
    peaked[:, 5] = 0.0
    cases.append(peaked)  # one certain byte: valid
    above = peaked.copy()
    above[1, 5] = 2 * TOL  # a log-probability above 0
    cases.append(above)
    zeros = np.zeros((3, 256), dtype=np.float32)  # "probability 1" everywhere: sums to 256
    cases.append(zeros)
    for _ in range(50):
        logits = rng.normal(0, rng.uniform(0.1, 30), (8, 256))
        logits -= np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1, keepdims=True))
        noisy = logits + rng.normal(0, rng.choice([0, 1e-5, 1e-3, 1e-1]), logits.shape)
        cases.append(noisy.astype(np.float32))
    return cases


@pytest.mark.parametrize("index", range(len(_edge_cases())))
def test_fast_and_detailed_checks_agree(index: int) -> None:
    rows = _edge_cases()[index]
    assert replies.logprob_problem(rows) == replies._logprob_problem_detail(rows)


def test_the_edges_are_both_accepted_and_refused() -> None:
    verdicts = [replies.logprob_problem(rows) is None for rows in _edge_cases()]
    assert any(verdicts) and not all(verdicts)


@pytest.mark.parametrize("text", ["AAA", "AA=A", "=AAA", " AAAA", "AAAA\n", "AA==AA==", "é"])
def test_malformed_base64_is_refused(text: str) -> None:
    reply = replies.LogprobsReply(ok=True, logprobs=text)
    with pytest.raises(WorkerFailure):
        replies.logprob_rows(reply, 1)


def test_a_worker_that_stops_reading_times_out(tmp_path: Path) -> None:
    # The request writes without waiting while the pipe has room: one far larger than a pipe
    # must still wait, and give up at the deadline.
    with create_sandbox("local", root=tmp_path) as box:
        session = WorkerSession(box, ["sleep", "60"])
        started = time.monotonic()
        with pytest.raises(WorkerTimeout):
            session.send({"op": "x", "pad": "a" * (8 << 20)}, time.monotonic() + 1.0)
        assert time.monotonic() - started < 30
        session.close()


def test_a_worker_that_died_is_a_crash(tmp_path: Path) -> None:
    with create_sandbox("local", root=tmp_path) as box:
        session = WorkerSession(box, ["true"])
        assert session.process.wait(timeout=30) == 0
        with pytest.raises(WorkerFailure) as caught:
            session.send({"op": "x", "pad": "a" * (1 << 20)}, time.monotonic() + 10)
        assert not isinstance(caught.value, WorkerTimeout)
        assert str(caught.value) == "crashed: the worker exited with status 0"
        session.close()


@pytest.mark.parametrize("context_bytes", [1, 4, 1024])
def test_phase2_sends_the_same_causal_contexts(context_bytes: int) -> None:
    # Context k of a question is (prompt + answer[:k])[-context_bytes:], as the protocol says.
    questions = [
        Question(id=f"q{i}", family="f", prompt="p" * i + "é" * (i % 3), answer="ab€"[: 1 + i % 3])
        for i in range(7)
    ]
    sent: list[list[bytes]] = []

    class Session:
        def request(self, message: dict[str, Any], deadline: float, max_bytes: int) -> Any:
            contexts = [base64.b64decode(c) for c in message["contexts"]]
            sent.append(contexts)
            rows = np.full((len(contexts), 256), -math.log(256.0), dtype=np.float32)
            return {"ok": True, "logprobs": base64.b64encode(rows.tobytes()).decode()}

    class Phase:
        session = Session()

    params = GradingParams(context_bytes=context_bytes, batch_size=3)
    bpb = phases.run_phase2(Phase(), questions, params, lambda *_: None)  # type: ignore[arg-type]
    assert bpb == pytest.approx(8.0)
    expected: list[list[bytes]] = []
    order = phases._by_prompt_length(questions, context_bytes)
    for start in range(0, len(order), 3):
        texts = [
            (questions[i].prompt.encode(), questions[i].answer.encode())
            for i in order[start : start + 3]
        ]
        for k in range(max(len(a) for _, a in texts)):
            expected.append([(p + a[:k])[-context_bytes:] for p, a in texts if k < len(a)])
    assert sent == expected
