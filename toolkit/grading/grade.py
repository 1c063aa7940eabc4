"""Grade a bundle on an exam (DESIGN §4): pack, size-check, phase 1 exact match, phase 2 bpb.

The host holds the exam and never gives it to the worker; each phase runs in a fresh worker in
a fresh sandbox with a fresh copy of the bundle (`phases.py`), phase 2 only after phase 1 is
over. Whatever the bundle does, the outcome is a `GradeReport`; this module raises only for a
missing or unreadable exam (the operator's mistake) and for bugs of its own (or a sandbox that
breaks: an infrastructure failure, not the bundle's).

A grading is hidden unless the caller says it is public (`hidden=False`: public scoring on the
public validation set during a run, whose feedback goes to the agent that wrote the bundle). In
a hidden grading nothing the bundle's code said reaches the report, and no number it could
steer is reported finely (`publish.py`): reasons are fixed phrases without exit statuses or
batch numbers, bits per byte is clipped and coarse, the ablated score is rounded down to a
tenth of the exam; the exact values and what the bundle said go to the operator log
(`secret_log`), and an exception of the harness's own comes out as a `GradingError` whose text
is fixed, chained to nothing. The report's `timings` stay exact: they are the operator's, and a
run publishes only `publish.coarse_seconds` of its grading.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from exam_builder.exam_file import Question, load_exam, sha256_file
from toolkit.grading import ablation as weights_ablation
from toolkit.grading import publish, secret_log, warm
from toolkit.grading.pack import BundleError, PackedBundle, extract_bundle, pack_bundle
from toolkit.grading.phases import Outcome, PhaseWorker, Progress, run_phase1, run_phase2
from toolkit.grading.progress_bar import ProgressBar
from toolkit.grading.report import Ablation, GradeReport
from toolkit.grading.session import Category, Kind, WorkerFailure
from toolkit.results.model import FamilyScore, Score
from toolkit.tracks.model import GradingParams

SIZE_LIMIT_BYTES = 16_000_000


class GradingError(RuntimeError):
    """The harness failed during a hidden grading; the text is fixed, the details are in the
    operator log. `kind`: the class of the exception it stands for (a type of the harness's own,
    never text), so callers can still tell a sandbox that broke from a bug."""

    def __init__(self, text: str, kind: type[BaseException]) -> None:
        super().__init__(text)
        self.kind = kind


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
    cpus: float | None = None
    cancelled: Callable[[], bool] | None = None
    kept: bool = False
    """The caller keeps `work` to inspect: the bundle's writes stay there (no ephemeral root)."""
    hidden: bool = True
    """A hidden grading: the bundle's words stay out of the report."""
    exact_lengths: bool = False
    """Phase 1 asks each answer's own length (the old protocol; comparison tests only)."""
    written: dict[str, bytes] | None = None
    """Filled with each question's output by phase 1 of a public grading (`questions.py`)."""
    prestart: bool = True
    """Each phase's worker starts as the grading begins, before packing (False: each when its
    phase begins; the benchmark's baseline)."""
    warm_torch: bool = True
    """The workers import torch before the bundle loads (`warm.names_torch` of the bundle)."""
    warm_numpy: bool = True
    """The workers import numpy before the bundle loads (`warm.names_numpy` of the bundle)."""


def give_up_bytes(size_limit_bytes: int) -> int:
    """Where packing stops: far enough past the limit to report a near miss's exact size."""
    return 2 * size_limit_bytes + 2**20


def _prepare_archive(bundle: Path, work: Path, size_limit_bytes: int) -> PackedBundle:
    """Our own deterministic archive of the bundle, whether given a folder or an archive."""
    archive = work / "bundle.tar.gz"
    give_up = give_up_bytes(size_limit_bytes)
    if bundle.is_dir():
        # The caller's path is trusted (resolved here); nothing inside the bundle is followed.
        return pack_bundle(bundle.resolve(), archive, give_up_bytes=give_up)
    if bundle.is_file():
        # Re-pack from a safe extraction: the size and hash are of *our* archive.
        unpacked = work / "unpacked"
        extract_bundle(bundle, unpacked)
        return pack_bundle(unpacked, archive, give_up_bytes=give_up)
    raise BundleError(f"{bundle}: no such bundle folder or archive")


PHASE_LABELS = {"phase1": "phase 1", "phase2": "phase 2", "phase1-ablated": "ablation"}
"""How `progress` names each phase's worker (its steps: "phase 1: generate", ...)."""


def _run_phase(
    name: str,
    archive: Path,
    job: _Job,
    out: Outcome,
    body: Callable[[PhaseWorker], None],
    times: dict[str, float],
    ready: _Spare | None = None,
) -> None:
    """Take `ready`'s worker (started waiting, before the bundle was packed) and let it go on,
    or start a fresh worker; wait for load, run `body`; fills times["load"] and times["body"].
    Closes the worker, `ready`'s included.

    Load time is measured on the host: sandbox and interpreter start-up, imports and `load()`
    (for `ready`: what its start-up had left when this phase began, and its load). With
    `job.cancelled`, a watcher kills the worker (and all it started) once it says so.
    """
    if job.cancelled is not None and job.cancelled():
        if ready is not None:
            ready.discard()
        raise WorkerFailure(CANCELLED_CATEGORY)
    started = time.monotonic()
    # The load (sandbox and interpreter start, imports, load()) can take minutes on a busy
    # CPU: reported as a step of its own, so that a progress display is never silent.
    loading = f"{PHASE_LABELS.get(name, name)}: load the bundle"
    job.progress(loading, 0, 1)
    waiting = ready.take() if ready is not None else None
    phase = waiting or _start_worker(name, archive, job)
    out.isolation, out.not_isolated = phase.sandbox.isolation, phase.sandbox.not_isolated
    done = _kill_when(job.cancelled, phase) if job.cancelled is not None else None
    try:
        try:
            if waiting is not None:
                phase.go(archive, job.params.load_timeout_s)
            phase.load(job.params.load_timeout_s)
        finally:
            times["load"] = time.monotonic() - started
        job.progress(loading, 1, 1)
        loaded = time.monotonic()
        try:
            body(phase)
        finally:
            times["body"] = time.monotonic() - loaded
    except WorkerFailure:
        if job.cancelled is not None and job.cancelled():
            raise WorkerFailure(CANCELLED_CATEGORY) from None  # killed by the watcher: say why
        raise
    finally:
        if done is not None:
            done.set()
        phase.close()


def _start_worker(name: str, archive: Path | None, job: _Job, wait: bool = False) -> PhaseWorker:
    return PhaseWorker(
        archive,
        job.work / name,
        exam=job.exam_file,
        backend=job.backend,
        device=job.device,
        params=job.params,
        hide=job.hide,
        cpus=job.cpus,
        ephemeral=not job.kept,
        wait=wait,
        warm_torch=job.warm_torch,
        # Phase 2's worker turns the bundle's log-probabilities into numpy arrays itself.
        warm_numpy=job.warm_numpy or name == "phase2",
    )


class _Spare:
    """A phase's worker started (in a thread) as the grading begins, before the bundle is even
    packed: its sandbox, interpreter, imports and CUDA start-up overlap the packing and, for
    phase 2, phase 1, instead of following them. It holds nothing of the bundle until its go,
    which brings our archive over the pipe (`PhaseWorker.go`).

    Phase 2's go is sent only after phase 1's worker, and every process it started, is gone:
    phase 2 shows answer bytes, and by then no process that saw phase 1's questions unanswered
    is alive to learn them. If starting a spare fails, its phase starts a worker the usual way
    (and meets the same failure there).
    """

    def __init__(self, name: str, job: _Job) -> None:
        self.worker: PhaseWorker | None = None
        self._archive: Path | None = None
        self._given = threading.Event()
        self.thread = threading.Thread(target=self._start, args=(name, job), daemon=True)
        self.thread.start()

    def _start(self, name: str, job: _Job) -> None:
        try:
            self.worker = _start_worker(name, None, job, wait=True)
        except BaseException:
            shutil.rmtree(job.work / name, ignore_errors=True)  # the phase starts afresh
            return
        self._given.wait()
        if self._archive is None:
            return  # the bundle goes with the go
        try:  # in this thread: the worker reads it only once its warm-up is over
            self.worker.give(self._archive, job.params.load_timeout_s)
        except BaseException:
            self.worker.close()
            self.worker = None
            shutil.rmtree(job.work / name, ignore_errors=True)  # the phase starts afresh

    def give(self, archive: Path) -> None:
        """Send the bundle ahead of the go (unpacking it runs none of the bundle's code)."""
        self._archive = archive
        self._given.set()

    def take(self) -> PhaseWorker | None:
        """The started worker (the caller closes it), or None."""
        self._given.set()
        self.thread.join()
        worker, self.worker = self.worker, None
        return worker

    def discard(self) -> None:
        """Close the worker unused (a send of the bundle still in progress ends with it)."""
        self._given.set()
        started = self.worker
        if started is not None:
            started.session.process.kill()  # unblocks a send to a worker still warming up
        worker = self.take()
        if worker is not None:
            worker.close()


CANCELLED_CATEGORY = Category(Kind.CANCELLED)
CANCELLED = str(CANCELLED_CATEGORY)
CANCEL_POLL_S = 0.1


def _kill_when(cancelled: Callable[[], bool], phase: PhaseWorker) -> threading.Event:
    """Watch `cancelled` while a phase runs and kill its worker's whole tree when it turns true;
    set the event returned to stop watching."""
    done = threading.Event()

    def watch() -> None:
        while not done.wait(CANCEL_POLL_S):
            if cancelled():
                phase.session.process.kill()
                return

    threading.Thread(target=watch, name="grading-cancel", daemon=True).start()
    return done


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
    cpus: float | None = None,
    cancelled: Callable[[], bool] | None = None,
    ablation: bool = False,
    hidden: bool = True,
    _exact_lengths: bool = False,
    _prestart: bool = True,
    _written: dict[str, bytes] | None = None,
) -> GradeReport:
    """Grade `bundle` (folder or .tar.gz) on `exam`; a bad bundle is a report, not an error.

    `hidden` (the default): nothing the bundle says is reported (see the module docstring);
    False only where the exam is public and the bundle's author may read its errors.
    `_exact_lengths`: phase 1 asks each answer's own length (the protocol before length
    hiding), for the test that shows both protocols pass the same questions.
    `_prestart=False`: each phase's worker starts only when its phase begins (for the
    benchmark that measures what starting them as the grading begins saves).

    `progress`: True for a progress bar on stderr, or a callback (phase, done, total).
    `hide`: more host paths the worker must not see. Always hidden, whatever is passed: the
    exam file and its folder, the state folder, the exam engine, the toolkit and its checkout
    (`hiding.grading_hidden`). The caller adds what only it knows of (a run's real exam while
    a candidate is scored on the public set, hidden banks, results).
    `workdir`: where the archive and the per-phase sandboxes go; kept afterwards when given
    (for inspection, with what the bundle wrote in its folders: those are then plain folders,
    capped per file only), otherwise a temporary folder that is removed (and each worker's
    folder is an ephemeral root: its writes count against `disk_bytes` and vanish with it).
    `cpus`: a CPU quota for the worker, in cores (a run's share of a shared box); None: the
    host's cores.
    `cancelled`: polled while a worker runs; once it returns True the worker and everything it
    started are killed and the grading ends failed ("grading cancelled"). A run's public
    scoring uses it: the bundle's code is the agent's, and stops with the call or the run.
    `ablation`: after the phases, phase 1 again on the bundle with its weights replaced by
    noise (`ablation.py`): the final grading does it, public scoring does not.
    """
    params = params or GradingParams()
    started = time.monotonic()
    if progress is True:
        with ProgressBar() as bar:
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
                cpus=cpus,
                cancelled=cancelled,
                ablation=ablation,
                hidden=hidden,
                _exact_lengths=_exact_lengths,
                _prestart=_prestart,
                _written=_written,
            )
    report_progress: Progress = progress or (lambda _name, _done, _total: None)
    params, notes = fit_to_host(params)
    questions = load_exam(exam)
    exam_file = exam / "exam.jsonl" if exam.is_dir() else exam
    exam_sha = sha256_file(exam_file)
    work = workdir or Path(tempfile.mkdtemp(prefix="ari-grade-"))
    work.mkdir(parents=True, exist_ok=True)
    warms = warm.named(bundle)  # the bundle's files read once
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
            cpus=cpus,
            cancelled=cancelled,
            kept=workdir is not None,
            hidden=hidden,
            exact_lengths=_exact_lengths,
            prestart=_prestart,
            written=_written,
            warm_torch="torch" in warms,
            warm_numpy=bool(warms),  # torch imports numpy
        )
        try:
            out, packed = _grade(bundle, job, started)
            ablated = _ablate(job, out, packed) if ablation else None
        except Exception as exc:
            if not hidden:
                raise
            # The harness's own failure; its text or its chain may still quote the bundle (a
            # file name, a reply): the operator gets the traceback, the caller a fixed line.
            name = failure_name(exc)
            secret_log.record(
                f"grading failed in the harness ({name})", traceback.format_exc(), exam=exam_sha
            )
            raise GradingError(
                f"grading failed in the harness ({name}); the details are in the operator log",
                type(exc),
            ) from None
    finally:
        if workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    out.timings.total = time.monotonic() - started
    report = _report(out, questions, packed, size_limit_bytes, exam_sha, backend, device, hidden)
    report.notes = notes
    report.score_measured = "generate" in phases
    if ablated is not None:
        if hidden and ablated.score is not None:  # published coarsely; the flag from that
            exact, coarse = ablated.score, publish.coarse_ablation(ablated.score)
            ablated = ablated.model_copy(
                update={
                    "score": coarse,
                    "model_free_suspect": weights_ablation.is_suspect(report.score, coarse),
                }
            )
            secret_log.record(
                "weights ablation (exact)", f"{exact.passed}/{exact.total}", exam=exam_sha
            )
        report.ablation = ablated
        report.weights_ablation, report.model_free_suspect = (
            ablated.score,
            ablated.model_free_suspect,
        )
    if hidden:
        _record_secrets(out, exam_sha, report.sha256)
    return report


def failure_name(exc: BaseException) -> str:
    """What may be said of an exception out of a hidden grading: its type's name, no text."""
    name = type(exc).__name__
    return name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,60}", name) else "Exception"


def _record_secrets(out: Outcome, exam_sha: str, bundle_sha: str | None) -> None:
    """What a hidden grading publishes only coarsely or not at all, to the operator log: each
    failure's full category (batch, exit status) and what the bundle said, the exact bits per
    byte."""
    for failure in (f for f in (out.failure, out.bpb_failure) if f is not None):
        secret_log.record(
            str(failure.category), failure.log_detail, exam=exam_sha, bundle=bundle_sha
        )
    if out.bpb is not None:
        secret_log.record("bits per byte (exact)", repr(out.bpb), exam=exam_sha, bundle=bundle_sha)
    if out.problems:
        detail = "; ".join(f"{p.question}: {p.detail}" for p in out.problems)
        secret_log.record("problems", detail, exam=exam_sha, bundle=bundle_sha)


def _ablate(job: _Job, out: Outcome, packed: PackedBundle | None) -> Ablation:
    """The weights ablation: phase 1 in a fresh sandbox on the bundle with noise for weights."""

    def phase1(archive: Path, into: Outcome) -> None:
        progress = weights_ablation.progress(job.progress)
        body = lambda phase: run_phase1(phase, job.questions, job.params, into, progress)  # noqa: E731
        _run_phase("phase1-ablated", archive, job, into, body, {})

    real = Score(
        percent=100.0 * len(out.passed) / len(job.questions),
        passed=len(out.passed),
        total=len(job.questions),
    )
    done = weights_ablation.run(packed.path if out.ok and packed else None, job.work, real, phase1)
    job.progress(f"ablation: done, {done.note}", 1, 1)  # its load may have failed: said here
    return done


def host_memory_bytes() -> int:
    """Physical memory of this host, or the memory limit of this process's cgroup if lower."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        cgroup = Path("/proc/self/cgroup").read_text().strip().split("::", 1)[1]
        limit = Path("/sys/fs/cgroup", cgroup.lstrip("/"), "memory.max").read_text().strip()
        if limit.isdigit():
            total = min(total, int(limit))
    except (OSError, IndexError):
        pass  # cgroup v1 or none: the physical memory is the bound
    return total


def fit_to_host(params: GradingParams) -> tuple[GradingParams, list[str]]:
    """`params` with a memory cap no larger than this host has, and a note when it was lowered.

    A cap above the host's memory caps nothing and sizes the worker's private tmpfs beyond
    what the host can hold.
    """
    host = host_memory_bytes()
    if params.memory_bytes <= host:
        return params, []
    note = (
        f"memory cap lowered from {params.memory_bytes / 2**30:.1f} GiB to this host's "
        f"{host / 2**30:.1f} GiB"
    )
    return params.model_copy(update={"memory_bytes": host}), [note]


def _grade(bundle: Path, job: _Job, started: float) -> tuple[Outcome, PackedBundle | None]:
    """The phases of `grade_bundle`, in `work`; bundle failures end up in the outcome."""
    out = Outcome(written=None if job.hidden else job.written)  # never a hidden grading's
    spares: dict[str, _Spare] = {}  # each phase's worker, started before packing
    if job.prestart:
        for name, phase in (("phase1", "generate"), ("phase2", "bpb")):
            if phase in job.phases:
                spares[name] = _Spare(name, job)
    try:
        return _phases(bundle, job, started, out, spares)
    finally:
        for unused in spares.values():
            unused.discard()


def _phases(
    bundle: Path, job: _Job, started: float, out: Outcome, spares: dict[str, _Spare]
) -> tuple[Outcome, PackedBundle | None]:
    packed: PackedBundle | None = None
    try:
        packed = _prepare_archive(bundle, job.work, job.size_limit_bytes)
        out.timings.pack = time.monotonic() - started
        if packed.packed_bytes > job.size_limit_bytes:
            limits = (packed.packed_bytes, job.size_limit_bytes)
            raise WorkerFailure(Category(Kind.TOO_LARGE, limits))
        if "phase2" in spares and "generate" in job.phases:
            spares["phase2"].give(packed.path)  # unpacked while phase 1 runs
        if "generate" in job.phases:

            def generate(phase: PhaseWorker) -> None:
                job.progress("phase 1: generate", 0, len(job.questions))
                run_phase1(
                    phase,
                    job.questions,
                    job.params,
                    out,
                    job.progress,
                    _exact_lengths=job.exact_lengths,
                )

            times: dict[str, float] = {}
            try:
                _run_phase(
                    "phase1", packed.path, job, out, generate, times, spares.pop("phase1", None)
                )
            finally:
                out.timings.load = times.get("load", 0.0)
                out.timings.phase1 = times.get("body", 0.0)
    except BundleError as exc:
        out.ok, out.failure = False, WorkerFailure(Category(Kind.REJECTED), str(exc))
    except WorkerFailure as exc:
        out.ok, out.failure = False, exc
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
                    run_phase2(phase, job.questions, job.params, job.progress)
                ),
                times2,
                ready=spares.pop("phase2", None),
            )
            out.bpb = result[0]
        except BundleError as exc:
            out.bpb_failure = WorkerFailure(Category(Kind.REJECTED), str(exc))
        except WorkerFailure as exc:
            out.bpb_failure = exc
        out.timings.phase2 = times2.get("load", 0.0) + times2.get("body", 0.0)
    elif "bpb" in job.phases:
        out.bpb_reason = "not measured: phase 1 did not complete"
    else:
        out.bpb_reason = "not measured: phase 2 was not requested"
    return out, packed


def _reason(failure: WorkerFailure, hidden: bool) -> str:
    """A failure as the report says it: a fixed phrase (hidden), or with the bundle's words."""
    return publish.hidden_reason(failure.category) if hidden else failure.text(public=True)


def _report(
    out: Outcome,
    questions: list[Question],
    packed: PackedBundle | None,
    size_limit: int,
    exam_sha: str,
    backend: str,
    device: str,
    hidden: bool,
) -> GradeReport:
    public = not hidden
    families: dict[str, FamilyScore] = {}
    for q in questions:
        fam = families.setdefault(q.family, FamilyScore(passed=0, total=0))
        fam.total += 1
        fam.passed += q.id in out.passed
    passed = len(out.passed)
    reason = _reason(out.failure, hidden) if out.failure is not None else None
    if reason is None and out.problems and public:
        first = out.problems[0].text(public=public)
        reason = f"{out.problem_count} outputs of the wrong length or type (first: {first})"
    elif reason is None and out.problems:  # how many, and which, are the bundle's choice
        reason = publish.WRONG_OUTPUTS
    bpb_reason = out.bpb_reason
    if out.bpb_failure is not None:
        bpb_reason = f"not available: {_reason(out.bpb_failure, hidden)}"
    bpb = publish.coarse_bpb(out.bpb) if hidden else out.bpb
    return GradeReport(
        ok=out.ok,
        reason=reason,
        score=Score(percent=100.0 * passed / len(questions), passed=passed, total=len(questions)),
        families=dict(sorted(families.items())),
        bits_per_byte=bpb,
        bpb_reason=bpb_reason,
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
        problems=[p.text(public=public) for p in out.problems],
    )
