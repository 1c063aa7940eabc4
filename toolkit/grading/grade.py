"""Grade a bundle on an exam (DESIGN §4): pack, size-check, phase 1 exact match, phase 2 bpb.

The host holds the exam and never gives it to the worker. Phase 1 sends each question's prompt
(its last `context_bytes` bytes) and the answer's *length*; the worker replies with generated
bytes, and the host compares. Phase 2 starts a fresh worker (fresh sandbox, fresh copy of the
bundle) only after phase 1 is over and asks for next-byte log-probabilities at every answer
byte, given the prompt plus the answer bytes before it.

Whatever the bundle does, the outcome is a `GradeReport`; this module raises only for a missing
or unreadable exam (the operator's mistake) and for bugs of its own.
"""

from __future__ import annotations

import base64
import math
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from exam_builder.exam_file import Question, load_exam, sha256_file
from toolkit.grading.pack import BundleError, PackedBundle, extract_bundle, pack_bundle
from toolkit.grading.report import GradeReport, Timings
from toolkit.grading.session import WorkerFailure, WorkerSession, WorkerTimeout
from toolkit.results import FamilyScore, Score
from toolkit.sandbox import Limits, create_sandbox
from toolkit.tracks import GradingParams

SIZE_LIMIT_BYTES = 16_000_000
WORKER_SCRIPT = Path(__file__).with_name("worker.py")
MAX_PROCESSES = 512  # threads count here too (pids cgroup): room for BLAS/OpenMP pools
MAX_FILE_BYTES = 2**30  # a bundle may write scratch files, not fill the disk
MAX_PROBLEMS = 20

Progress = Callable[[str, int, int], None]
"""Progress callback: (phase name, done, total)."""


@dataclass
class _Outcome:
    """What the phases found, turned into a report at the end."""

    passed: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)
    problem_count: int = 0
    reason: str | None = None
    ok: bool = True
    bpb: float | None = None
    bpb_reason: str | None = None
    isolation: list[str] = field(default_factory=list)
    not_isolated: list[str] = field(default_factory=list)
    timings: Timings = field(default_factory=Timings)

    def problem(self, text: str) -> None:
        self.problem_count += 1
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(text)


@dataclass(frozen=True)
class _Job:
    """What one grading is asked to do (the arguments of `grade_bundle`, resolved)."""

    questions: list[Question]
    exam_file: Path
    work: Path
    params: GradingParams
    size_limit_bytes: int
    backend: str
    device: str
    phases: tuple[str, ...]
    progress: Progress
    hide: Sequence[Path]


def _batches(order: Sequence[int], size: int) -> Iterator[list[int]]:
    for start in range(0, len(order), size):
        yield list(order[start : start + size])


class _Phase:
    """One worker in one fresh sandbox, with the bundle extracted into it."""

    def __init__(
        self,
        archive: Path,
        root: Path,
        *,
        exam: Path,
        backend: str,
        device: str,
        params: GradingParams,
        hide: Sequence[Path] = (),
    ) -> None:
        root.mkdir(parents=True)
        extract_bundle(archive, root / "bundle")
        shutil.copyfile(WORKER_SCRIPT, root / "worker.py")
        hidden = exam.parent.resolve()
        # Hide the exam's whole folder, unless the work folder lives inside it (then the file).
        exam_hidden = exam.resolve() if root.resolve().is_relative_to(hidden) else hidden
        hidden_paths = [exam_hidden, *(p.resolve() for p in hide if p.exists())]
        limits = Limits(
            memory_bytes=params.memory_bytes,
            max_processes=MAX_PROCESSES,
            file_size_bytes=MAX_FILE_BYTES,
        )
        # The interpreter and its libraries, visible read-only (they may sit under a private
        # home, e.g. pyenv in /root, that the sandbox user could not otherwise traverse).
        # In a container the image brings its own interpreter (same packages, pinned by digest).
        local = backend == "local"
        runtime = sorted({Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve()})
        runtime = runtime if local else []
        python = sys.executable if local else "python3"
        self.sandbox = create_sandbox(
            backend, root=root, network=False, hide=hidden_paths, limits=limits, readonly=runtime
        )
        try:
            self.session = WorkerSession(
                self.sandbox, [python, "-I", "worker.py", "bundle", device]
            )
        except BaseException:
            self.sandbox.cleanup()
            raise

    def load(self, timeout_s: float) -> float:
        """Wait for the bundle's load(); its duration, or WorkerFailure with the reason."""
        try:
            reply = self.session.receive(time.monotonic() + timeout_s)
        except WorkerTimeout:
            raise WorkerFailure(f"load() did not finish within {timeout_s:g} s") from None
        if not reply.get("ok"):
            raise WorkerFailure(f"the bundle failed to load: {_error_text(reply)}")
        return float(reply.get("load_s", 0.0))

    def close(self) -> None:
        self.session.close()
        self.sandbox.cleanup()


def _error_text(reply: dict[str, Any]) -> str:
    return str(reply.get("error", "no reason given"))[:300]


def _ask(
    phase: _Phase, message: dict[str, Any], params: GradingParams, phase_end: float, what: str
) -> dict[str, Any]:
    """One request with the per-batch and per-phase limits; raises WorkerFailure."""
    batch_end = time.monotonic() + params.batch_timeout_s
    try:
        return phase.session.request(message, min(batch_end, phase_end))
    except WorkerTimeout:
        if batch_end <= phase_end:
            raise WorkerFailure(
                f"{what} took longer than the {params.batch_timeout_s:g} s limit per batch"
            ) from None
        raise WorkerFailure(
            f"{what}: the phase ran past its {params.total_timeout_s:g} s limit"
        ) from None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _phase1(
    phase: _Phase,
    questions: list[Question],
    params: GradingParams,
    out: _Outcome,
    progress: Progress,
) -> None:
    """Greedy generation of every answer; sets passes and problems, raises WorkerFailure."""
    prompts = [q.prompt.encode()[-params.context_bytes :] for q in questions]
    answers = [q.answer.encode() for q in questions]
    order = _by_prompt_length(questions, params.context_bytes)
    phase_end = time.monotonic() + params.total_timeout_s
    done = 0
    for n, batch in enumerate(_batches(order, params.batch_size), 1):
        message = {
            "op": "generate",
            "prompts": [_b64(prompts[i]) for i in batch],
            "lengths": [len(answers[i]) for i in batch],
        }
        reply = _ask(phase, message, params, phase_end, f"generate() on batch {n}")
        if not reply.get("ok"):
            raise WorkerFailure(f"generate() failed on batch {n}: {_error_text(reply)}")
        for i, output, kind in zip(batch, reply["outputs"], reply["types"], strict=True):
            q = questions[i]
            if output is None:
                out.problem(f"{q.id}: generate() returned {kind}, not bytes")
                continue
            got = base64.b64decode(output)
            if len(got) != len(answers[i]):
                out.problem(f"{q.id}: expected {len(answers[i])} bytes, got {len(got)}")
            elif got == answers[i]:
                out.passed.add(q.id)
        done += len(batch)
        progress("phase 1: generate", done, len(questions))


def _by_prompt_length(questions: list[Question], context_bytes: int) -> list[int]:
    """Question order for batching: similar prompt lengths together (less padding)."""
    lengths = [len(q.prompt.encode()[-context_bytes:]) for q in questions]
    return sorted(range(len(questions)), key=lambda i: (lengths[i], i))


def _phase2(
    phase: _Phase, questions: list[Question], params: GradingParams, progress: Progress
) -> float:
    """Bits per byte over every answer byte given prompt + earlier answer bytes.

    One request carries every context of `batch_size` questions, so that a bundle can compute
    a question's answer positions in one forward pass (they are prefixes of each other).
    """
    total_bytes = sum(len(q.answer.encode()) for q in questions)
    phase_end = time.monotonic() + params.total_timeout_s
    bits, done = 0.0, 0
    order = _by_prompt_length(questions, params.context_bytes)
    for n, batch in enumerate(_batches(order, params.batch_size), 1):
        contexts: list[bytes] = []
        targets: list[int] = []
        for i in batch:
            prompt, answer = questions[i].prompt.encode(), questions[i].answer.encode()
            for k, byte in enumerate(answer):
                contexts.append((prompt + answer[:k])[-params.context_bytes :])
                targets.append(byte)
        message = {"op": "logprobs", "contexts": [_b64(c) for c in contexts]}
        reply = _ask(phase, message, params, phase_end, f"next_byte_logprobs() on batch {n}")
        if not reply.get("ok"):
            raise WorkerFailure(f"next_byte_logprobs() failed: {_error_text(reply)}")
        rows = np.frombuffer(base64.b64decode(reply["logprobs"]), dtype=np.float32)
        rows = rows.reshape(len(contexts), 256)
        picked = rows[np.arange(len(contexts)), targets].astype(np.float64)
        if not np.all(np.isfinite(picked)) or np.any(picked > 1e-3):
            raise WorkerFailure("next_byte_logprobs() returned values that are not log-probs")
        bits -= float(picked.sum()) / math.log(2)
        done += len(contexts)
        progress("phase 2: bits per byte", done, total_bytes)
    return bits / total_bytes


def _prepare_archive(bundle: Path, work: Path) -> PackedBundle:
    """Our own deterministic archive of the bundle, whether given a folder or an archive."""
    archive = work / "bundle.tar.gz"
    if bundle.is_dir():
        return pack_bundle(bundle, archive)
    if bundle.is_file():
        # Re-pack from a safe extraction: the size and hash are of *our* archive.
        unpacked = work / "unpacked"
        extract_bundle(bundle, unpacked)
        return pack_bundle(unpacked, archive)
    raise BundleError(f"{bundle}: no such bundle folder or archive")


def _run_phase(
    name: str,
    archive: Path,
    job: _Job,
    out: _Outcome,
    body: Callable[[_Phase], None],
    times: dict[str, float],
) -> None:
    """Start a fresh worker, wait for load, run `body`; fills times["load"] and times["body"].

    Load time is measured on the host: sandbox and interpreter start-up, imports and `load()`.
    """
    started = time.monotonic()
    phase = _Phase(
        archive,
        job.work / name,
        exam=job.exam_file,
        backend=job.backend,
        device=job.device,
        params=job.params,
        hide=job.hide,
    )
    out.isolation, out.not_isolated = phase.sandbox.isolation, phase.sandbox.not_isolated
    try:
        try:
            phase.load(job.params.load_timeout_s)
        finally:
            times["load"] = time.monotonic() - started
        loaded = time.monotonic()
        try:
            body(phase)
        finally:
            times["body"] = time.monotonic() - loaded
    finally:
        phase.close()


def grade_bundle(
    bundle: Path,
    exam: Path,
    *,
    params: GradingParams | None = None,
    size_limit_bytes: int = SIZE_LIMIT_BYTES,
    backend: str = "local",
    device: str = "cpu",
    phases: tuple[str, ...] = ("generate", "bpb"),
    progress: bool | Progress = False,
    workdir: Path | None = None,
    hide: Sequence[Path] = (),
) -> GradeReport:
    """Grade `bundle` (folder or .tar.gz) on `exam`; a bad bundle is a report, not an error.

    `progress`: True for a progress bar on stderr, or a callback (phase, done, total).
    `hide`: more host paths the worker must not see (the exam's folder is always hidden).
    `workdir`: where the archive and the per-phase sandboxes go; kept afterwards when given
    (for inspection), otherwise a temporary folder that is removed.
    """
    params = params or GradingParams()
    started = time.monotonic()
    if progress is True:
        with _ProgressBar() as bar:
            return grade_bundle(
                bundle,
                exam,
                params=params,
                size_limit_bytes=size_limit_bytes,
                backend=backend,
                device=device,
                phases=phases,
                progress=bar.update,
                workdir=workdir,
                hide=hide,
            )
    report_progress: Progress = progress or (lambda _name, _done, _total: None)
    questions = load_exam(exam)
    exam_file = exam / "exam.jsonl" if exam.is_dir() else exam
    exam_sha = sha256_file(exam_file)
    work = workdir or Path(tempfile.mkdtemp(prefix="ari-grade-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        job = _Job(
            questions=questions,
            exam_file=exam_file,
            work=work,
            params=params,
            size_limit_bytes=size_limit_bytes,
            backend=backend,
            device=device,
            phases=phases,
            progress=report_progress,
            hide=hide,
        )
        out, packed = _grade(bundle, job, started)
    finally:
        if workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    out.timings.total = time.monotonic() - started
    return _report(out, questions, packed, size_limit_bytes, exam_sha, backend, device)


def _grade(bundle: Path, job: _Job, started: float) -> tuple[_Outcome, PackedBundle | None]:
    """The phases of `grade_bundle`, in `work`; bundle failures end up in the outcome."""
    out = _Outcome()
    packed: PackedBundle | None = None
    try:
        packed = _prepare_archive(bundle, job.work)
        out.timings.pack = time.monotonic() - started
        if packed.packed_bytes > job.size_limit_bytes:
            raise BundleError(
                f"packed bundle is {packed.packed_bytes:,} bytes, over the "
                f"{job.size_limit_bytes:,}-byte limit"
            )
        if "generate" in job.phases:

            def generate(phase: _Phase) -> None:
                job.progress("phase 1: generate", 0, len(job.questions))
                _phase1(phase, job.questions, job.params, out, job.progress)

            times: dict[str, float] = {}
            try:
                _run_phase("phase1", packed.path, job, out, generate, times)
            finally:
                out.timings.load = times.get("load", 0.0)
                out.timings.phase1 = times.get("body", 0.0)
    except (BundleError, WorkerFailure) as exc:
        out.ok, out.reason = False, str(exc)
    if "bpb" in job.phases and out.ok and packed is not None:
        result: list[float] = []
        times2: dict[str, float] = {}
        try:
            _run_phase(
                "phase2",
                packed.path,
                job,
                out,
                lambda phase: result.append(
                    _phase2(phase, job.questions, job.params, job.progress)
                ),
                times2,
            )
            out.bpb = result[0]
        except (BundleError, WorkerFailure) as exc:
            out.bpb_reason = str(exc)
        out.timings.phase2 = times2.get("load", 0.0) + times2.get("body", 0.0)
    elif "bpb" in job.phases:
        out.bpb_reason = "not measured: phase 1 did not complete"
    else:
        out.bpb_reason = "not measured: phase 2 was not requested"
    return out, packed


class _ProgressBar:
    """A rich progress bar (on stderr) with one task per phase."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        self.bar = Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=False,
        )
        self.tasks: dict[str, Any] = {}

    def __enter__(self) -> _ProgressBar:
        self.bar.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.bar.stop()

    def update(self, name: str, done: int, total: int) -> None:
        if name not in self.tasks:
            self.tasks[name] = self.bar.add_task(name, total=total)
        self.bar.update(self.tasks[name], completed=done, total=total)


def _report(
    out: _Outcome,
    questions: list[Question],
    packed: PackedBundle | None,
    size_limit: int,
    exam_sha: str,
    backend: str,
    device: str,
) -> GradeReport:
    families: dict[str, FamilyScore] = {}
    for q in questions:
        fam = families.setdefault(q.family, FamilyScore(passed=0, total=0))
        fam.total += 1
        fam.passed += q.id in out.passed
    passed = len(out.passed)
    reason = out.reason
    if reason is None and out.problems:
        reason = (
            f"{out.problem_count} outputs of the wrong length or type (first: {out.problems[0]})"
        )
    return GradeReport(
        ok=out.ok,
        reason=reason,
        score=Score(percent=100.0 * passed / len(questions), passed=passed, total=len(questions)),
        families=dict(sorted(families.items())),
        bits_per_byte=out.bpb,
        bpb_reason=out.bpb_reason,
        sha256=packed.sha256 if packed else None,
        packed_bytes=packed.packed_bytes if packed else None,
        size_limit_bytes=size_limit,
        exam_sha256=exam_sha,
        backend=backend,
        device=device,
        isolation=out.isolation,
        not_isolated=out.not_isolated,
        timings=out.timings,
        passed_ids=[q.id for q in questions if q.id in out.passed],
        problems=out.problems,
    )
