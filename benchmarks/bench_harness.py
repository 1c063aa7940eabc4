"""What does the harness itself cost per grading request? An instant bundle on the demo exam.

The bundle answers at once (zero bytes from generate(), uniform log-probabilities from
next_byte_logprobs(), both precomputed), so what is timed is the harness: building requests,
the framed pipe to the sandboxed worker and back (`session.py`), the worker's own decoding and
encoding, and the host's checks of each reply (`replies.py`). One worker in one local sandbox;
after its load():

- harness: phase 1 (`run_phase1`, one generate() request per batch) and phase 2 (`run_phase2`,
  one next_byte_logprobs() request per answer byte position per batch), as grading runs them;
- raw pipe: the same requests, built in advance, sent with `WorkerSession.request` alone (no
  reply parsing or checks): the round trip through the pipe and the worker.

Prints seconds per request and per question for each, and harness / raw; wall time, and the
host process's CPU time (steadier on a loaded machine: the worker runs in another process).
`--profile` prints the
host side's cProfile of phase 2 (the worker's share shows as time waiting in select).

    python benchmarks/bench_harness.py [--repeat 5] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import math
import os
import platform
import pstats
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from exam_builder.build import build_exam  # noqa: E402
from exam_builder.exam_file import Question, load_exam  # noqa: E402
from toolkit.grading import phases  # noqa: E402
from toolkit.grading.pack import pack_bundle  # noqa: E402
from toolkit.grading.session import MAX_FRAME  # noqa: E402
from toolkit.tracks.model import GradingParams  # noqa: E402

INSTANT = """
import numpy as np

UNIFORM = np.full((256, 256), -np.log(256.0), dtype=np.float32)


class Instant:
    def generate(self, prompts, lengths):
        return [bytes(n) for n in lengths]

    def next_byte_logprobs(self, contexts):
        return UNIFORM[: len(contexts)]


def load(bundle_dir, device):
    return Instant()
"""


def messages(questions: list[Question], params: GradingParams) -> tuple[list[Any], list[Any]]:
    """The requests phases 1 and 2 send, in the same order and with the same contents."""
    asked = phases.asked_length(questions)
    order = phases._by_prompt_length(questions, params.context_bytes)
    generate, logprobs = [], []
    for batch in phases._batches(order, params.batch_size):
        texts = [(questions[i].prompt.encode(), questions[i].answer.encode()) for i in batch]
        prompts = [phases._b64(p[-params.context_bytes :]) for p, _ in texts]
        generate.append({"op": "generate", "prompts": prompts, "lengths": [asked] * len(batch)})
        for k in range(max(len(a) for _, a in texts)):
            contexts = [(p + a[:k])[-params.context_bytes :] for p, a in texts if k < len(a)]
            logprobs.append({"op": "logprobs", "contexts": [phases._b64(c) for c in contexts]})
    return generate, logprobs


def best_s(action: Callable[[], object], repeat: int) -> tuple[float, float]:
    """The least disturbed of `repeat` runs (a shared machine), after a warm-up: wall seconds,
    and CPU seconds of this (the host's) process, the worker's excluded."""
    action()
    walls, cpus = [], []
    for _ in range(repeat):
        started, cpu = time.perf_counter(), time.process_time()
        action()
        walls.append(time.perf_counter() - started)
        cpus.append(time.process_time() - cpu)
    return min(walls), min(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="cProfile the host in phase 2")
    args = parser.parse_args()
    params = GradingParams()
    with tempfile.TemporaryDirectory(prefix="bench-harness-") as tmp:
        work = Path(tmp)
        bundle = work / "bundle"
        bundle.mkdir()
        (bundle / "inference.py").write_text(INSTANT)
        build_exam(REPO / "exam_builder/banks/public/demo", work / "exam", english_text=None)
        exam = work / "exam" / "exam.jsonl"
        questions = load_exam(exam)
        pack_bundle(bundle, work / "bundle.tar.gz")
        phase = phases.PhaseWorker(
            work / "bundle.tar.gz", work / "phase", exam=exam, backend="local",
            device="cpu", params=params,
        )  # fmt: skip
        try:
            phase.load(params.load_timeout_s)
            gen, logp = messages(questions, params)
            n = len(questions)
            answer_bytes = sum(len(q.answer.encode()) for q in questions)

            def harness1() -> None:
                out = phases.Outcome()
                phases.run_phase1(phase, questions, params, out, lambda *_: None)
                assert out.problem_count == 0

            def harness2() -> None:
                bpb = phases.run_phase2(phase, questions, params, lambda *_: None)
                assert math.isclose(bpb, 8.0, rel_tol=1e-4), bpb

            def raw(sent: list[Any]) -> Callable[[], None]:
                def send() -> None:
                    for message in sent:
                        reply = phase.session.request(message, time.monotonic() + 60, MAX_FRAME)
                        assert reply["ok"] is True

                return send

            (h1, c1), (h2, c2) = best_s(harness1, args.repeat), best_s(harness2, args.repeat)
            (r1, d1), (r2, d2) = best_s(raw(gen), args.repeat), best_s(raw(logp), args.repeat)
            print(
                f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
                f"{platform.python_version()}; exam: {n} questions, {answer_bytes} answer "
                f"bytes, batch size {params.batch_size}; best of {args.repeat}"
            )
            for name, h, c, r, d, count in (
                ("phase 1 (generate)", h1, c1, r1, d1, len(gen)),
                ("phase 2 (logprobs)", h2, c2, r2, d2, len(logp)),
            ):
                print(
                    f"{name}: {count} requests | harness {h * 1e3 / count:.3f} ms/request "
                    f"({c * 1e3 / count:.3f} ms host CPU), {h * 1e3 / n:.2f} ms/question, "
                    f"{h:.3f} s | raw pipe {r * 1e3 / count:.3f} ms/request "
                    f"({d * 1e3 / count:.3f} ms host CPU), {r:.3f} s | harness / raw "
                    f"{h / r:.2f}x wall, {c / d:.2f}x host CPU"
                )
            if args.profile:
                profiler = cProfile.Profile()
                profiler.runcall(harness2)
                pstats.Stats(profiler).sort_stats("tottime").print_stats(15)
        finally:
            phase.close()


if __name__ == "__main__":
    main()
