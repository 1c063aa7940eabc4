"""Both phases' workers start as the grading begins; phase 2's sees the bundle only once phase 1
is gone.

Grading starts each phase's sandbox and interpreter (and torch, and CUDA on a GPU) before the
bundle is even packed, so that neither start-up is paid on the way: the bundle goes to each
worker over its pipe with the worker's go. What must not change:
phase 2 shows answer bytes, so no process of phase 1 may still be alive when phase 2's bundle
code first runs. The attack: the bundle's load() leaves a detached process behind (its own
session, a command line with a token), and the test watches the host's process table: every
such process seen before phase 2's go must be gone by then. On both backends.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from grading_helpers import MakeBundle, MakeExam, code_questions

from toolkit.grading import grade, grade_bundle
from toolkit.grading.phases import PhaseWorker
from toolkit.tracks.model import GradingParams

pytestmark = pytest.mark.usefixtures("grading_backend")

LINGERER = """
import subprocess, sys, time

class Model:
    def generate(self, prompts, lengths):
        time.sleep(SLEEP)  # phase 1 lasts long enough for phase 2's worker to start
        return [b"x" * n for n in lengths]

    def next_byte_logprobs(self, contexts):
        import numpy as np
        return np.full((len(contexts), 256), -np.log(256.0), dtype=np.float32)

def load(bundle_dir, device):
    subprocess.Popen(
        [sys.executable, "-c", "import time\\nwhile True: time.sleep(0.02)", TOKEN],
        start_new_session=True,  # not a child the worker's exit takes along
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    return Model()

SLEEP = 1.0
TOKEN = "{token}"
"""


def _lingerer(token: str = "ari-lingerer-x", sleep: float = 1.0, fail: bool = False) -> str:
    """The bundle's source: its detached processes carry `token`; generate() sleeps `sleep`
    seconds per batch, then (with `fail`) raises."""
    source = LINGERER.replace("{token}", token).replace("SLEEP = 1.0", f"SLEEP = {sleep}")
    return (
        source.replace("time.sleep(SLEEP)  #", "time.sleep(SLEEP); raise RuntimeError('no')  #")
        if fail
        else source
    )


class _Watch:
    """Samples the host's processes whose command line holds `token`: pid -> (first, last)
    sample start times in which it was seen."""

    def __init__(self, token: str) -> None:
        self.token = token.encode()
        self.seen: dict[str, list[float]] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            began = time.monotonic()  # a process found in this scan was alive after `began`
            for pid in os.listdir("/proc"):
                try:
                    if pid.isdigit() and self.token in Path(f"/proc/{pid}/cmdline").read_bytes():
                        self.seen.setdefault(pid, [began, began])[1] = began
                except OSError:
                    pass
            time.sleep(0.005)

    def close(self) -> dict[str, list[float]]:
        self.stop.set()
        self.thread.join()
        return self.seen


def test_phase1_processes_are_gone_before_phase2_bundle_code_runs(
    make_bundle: MakeBundle,
    make_exam: MakeExam,
    fast_params: GradingParams,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    token = f"ari-lingerer-{uuid.uuid4().hex}"
    bundle = make_bundle(_lingerer(token))
    events = _Events(monkeypatch)
    watch = _Watch(token)
    try:
        report = grade_bundle(
            bundle, make_exam(code_questions(6)), params=fast_params, hidden=False
        )
    finally:
        seen = watch.close()
    assert report.ok, report.reason
    assert report.bits_per_byte is not None  # phase 2 ran
    (go,) = [at for what, name, at in events.timed if (what, name) == ("go", "phase2")]
    before = {pid: span for pid, span in seen.items() if span[0] < go}
    assert before, "no process of phase 1 was ever seen: the attack did not start"
    alive = {pid: span[1] - go for pid, span in before.items() if span[1] > go}
    assert not alive, f"phase 1's processes alive after phase 2's go (s after): {alive}"


class _Events:
    """What grading did, in order: worker starts, gos and closes, by phase folder."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, fail_spare: bool = False) -> None:
        self.timed: list[tuple[str, str, float]] = []
        start, go, close = grade._start_worker, PhaseWorker.go, PhaseWorker.close
        give = PhaseWorker.give
        self.carried: dict[str, bool] = {}  # phase -> whether its go carried the bundle

        def started(name: str, archive: Path | None, job: Any, wait: bool = False) -> PhaseWorker:
            self._note("start-waiting" if wait else "start", name)
            if wait and fail_spare:
                raise OSError("no sandbox for you")
            worker = start(name, archive, job, wait)
            worker.phase_name = name  # type: ignore[attr-defined]
            return worker

        def went(worker: PhaseWorker, archive: Path, timeout_s: float) -> None:
            self._note("go", worker.phase_name)  # type: ignore[attr-defined]
            self.carried[worker.phase_name] = worker.needs_archive  # type: ignore[attr-defined]
            go(worker, archive, timeout_s)

        def gave(worker: PhaseWorker, archive: Path, timeout_s: float) -> None:
            self._note("give", worker.phase_name)  # type: ignore[attr-defined]
            give(worker, archive, timeout_s)

        def closed(worker: PhaseWorker) -> None:
            close(worker)
            self._note("closed", worker.phase_name)  # type: ignore[attr-defined]

        monkeypatch.setattr(grade, "_start_worker", started)
        monkeypatch.setattr(PhaseWorker, "go", went)
        monkeypatch.setattr(PhaseWorker, "give", gave)
        monkeypatch.setattr(PhaseWorker, "close", closed)

    def _note(self, what: str, name: str) -> None:
        self.timed.append((what, name, time.monotonic()))

    @property
    def seen(self) -> list[tuple[str, str]]:
        return [(what, name) for what, name, _ in self.timed]


def test_phase2_worker_is_started_during_phase1_and_let_go_after_it(
    make_bundle: MakeBundle,
    make_exam: MakeExam,
    fast_params: GradingParams,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    events = _Events(monkeypatch)
    report = grade_bundle(
        make_bundle(_lingerer()),
        make_exam(code_questions(4)),
        params=fast_params,
        hidden=False,
    )
    assert report.ok and report.bits_per_byte is not None, report.reason
    # The two starts run in threads: either may be noted first; so does phase 2's bundle, sent
    # ahead (from its thread) to be unpacked while phase 1 runs.
    assert sorted(events.seen[:2]) == [("start-waiting", "phase1"), ("start-waiting", "phase2")]
    ahead = events.seen.index(("give", "phase2"))
    assert ahead < events.seen.index(("go", "phase2"))
    assert [e for e in events.seen[2:] if e != ("give", "phase2")] == [
        ("go", "phase1"),
        ("closed", "phase1"),
        ("go", "phase2"),
        ("closed", "phase2"),
    ]
    assert events.carried == {"phase1": True, "phase2": False}


def test_a_spare_that_cannot_start_leaves_phase2_to_start_its_own(
    make_bundle: MakeBundle,
    make_exam: MakeExam,
    fast_params: GradingParams,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bundle, exam = make_bundle(_lingerer("x", sleep=0.3)), make_exam(code_questions(4))
    normal = grade_bundle(bundle, exam, params=fast_params, hidden=False)
    events = _Events(monkeypatch, fail_spare=True)
    report = grade_bundle(bundle, exam, params=fast_params, hidden=False)
    assert report.model_dump(exclude={"timings"}) == normal.model_dump(exclude={"timings"})
    assert ("start", "phase1") in events.seen and ("go", "phase1") not in events.seen
    assert ("start", "phase2") in events.seen and ("go", "phase2") not in events.seen


def test_a_failed_phase1_closes_the_waiting_worker_unused(
    make_bundle: MakeBundle,
    make_exam: MakeExam,
    fast_params: GradingParams,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    events = _Events(monkeypatch)
    report = grade_bundle(
        make_bundle(_lingerer(fail=True)),
        make_exam(code_questions(4)),
        params=fast_params,
        hidden=False,
    )
    assert not report.ok and report.bits_per_byte is None
    assert ("start-waiting", "phase2") in events.seen
    assert ("closed", "phase2") in events.seen and ("go", "phase2") not in events.seen
