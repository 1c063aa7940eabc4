"""Guards on the harness's per-request path (benchmarks/bench_harness.py measures its cost).

Anything made faster there must keep every check: malformed base64 log-probabilities are
refused; phase 2 sends exactly the causal contexts `(prompt + answer[:k])[-context_bytes:]`;
a worker that stops reading times out, one that died is a crash.
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
from toolkit.tracks.model import GradingParams


@pytest.mark.parametrize("text", ["AAA", "AA=A", "=AAA", " AAAA", "AAAA\n", "AA==AA==", "é"])
def test_malformed_base64_is_refused(text: str) -> None:
    reply = replies.LogprobsReply(ok=True, logprobs=text)
    with pytest.raises(WorkerFailure):
        replies.logprob_rows(reply, 1)


def test_a_worker_that_stops_reading_times_out(tmp_path: Path) -> None:
    # A request far larger than a pipe waits for the worker to read, and gives up in time.
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


def test_a_dead_workers_last_words_are_kept_when_read_late(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under load the stderr drain can run after the worker is gone: its last words must still
    be in the failure's detail (the operator's log keeps them, public scoring shows them)."""
    drain = WorkerSession._drain_stderr

    def late(self: WorkerSession) -> None:
        time.sleep(1.0)  # a busy host: the thread gets the CPU after the worker has died
        drain(self)

    monkeypatch.setattr(WorkerSession, "_drain_stderr", late)
    with create_sandbox("local", root=tmp_path) as box:
        session = WorkerSession(box, ["sh", "-c", "echo LAST-WORDS-7 >&2; exit 3"])
        assert session.process.wait(timeout=30) == 3
        with pytest.raises(WorkerFailure) as caught:
            session.send({"op": "x", "pad": "a" * (1 << 20)}, time.monotonic() + 10)
        assert "LAST-WORDS-7" in caught.value.detail, caught.value.detail
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
