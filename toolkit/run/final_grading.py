"""The final grading (`orchestrate`, step 6): what the session left is checked first (a results
volume that filled, the history and the audit log against what the harness wrote, the
service's own errors); then the last promoted candidate is graded on the exam from its stored
archive, hidden: from its start, nothing published tells how long it took but a coarse
bucket. Returns the result to publish.
"""

from __future__ import annotations

import os
import tarfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from exam_builder.exam_file import sha256_file
from toolkit.grading import secret_log
from toolkit.grading.grade import GradingError, failure_name
from toolkit.grading.phases import Progress
from toolkit.grading.publish import bucket_end, coarse_seconds
from toolkit.grading.report import GradeReport
from toolkit.host.grading_lock import HostLock, accepted_rate, channel_accepted
from toolkit.results.chain import ChainError
from toolkit.results.model import FamilyScore, RunResult, Score
from toolkit.run import reference
from toolkit.run.artifacts import write_promoted_code
from toolkit.run.history import SubmissionHistory
from toolkit.run.live import Timeline
from toolkit.run.outcome import Publication, SessionRecord
from toolkit.run.start import RunInputs
from toolkit.run.submissions import Grader
from toolkit.run.supervise import Session
from toolkit.sandbox import SandboxError, SandboxTeardownTimeout

WAIT_ENV = "ARI_PUBLISH_WAIT"
"""`none`: publish right after a hidden grading, without waiting for its bucket's end (the test
suite, whose thousands of gradings would each wait a minute); the result then lacks
`ctime-bucketed` in its isolation, so such a run is told apart."""
GRADING_PHASES = 3
"""A hidden grading's sandboxed phases (generation, bits per byte, the weights ablation), each
with its load() and its whole-phase limit: the longest it can take, for the last bucket."""


@dataclass(frozen=True)
class FinalGrading:
    """What the final grading reads: the run's inputs, the grader its sandboxes hide from,
    the history, the session (its logs, its stored candidates, the live view), the result's
    skeleton (`publication`), and where the operator's progress bar goes (never agent.log)."""

    inputs: RunInputs
    grader: Grader
    history: SubmissionHistory
    session: Session
    publication: Publication
    timeline: Timeline
    progress: Progress | None = None
    host_lock: HostLock | None = None
    """The run's hold on the host (`grading_lock`): taken alone for an official track's
    hidden grading, unless the operator accepted the measured rate."""

    def result(self, stop_reason: str, record: SessionRecord) -> RunResult:
        """The result to publish: the session's checks, then the grading (`stop_reason`: why
        the session ended, for a run with nothing promoted; `record`: its length)."""
        publication, history, service = self.publication, self.history, self.session.service
        charged = publication.storage_charge()
        if charged is not None:
            return charged
        try:
            history.verify()
            service.audit.verify()
        except ChainError as exc:
            return publication.invalid(f"a run log was altered during the run: {exc}", "run-log")
        if service.infra_errors:
            errors = "; ".join(service.infra_errors[:3])
            return publication.invalid(
                f"infrastructure error during the run: {errors}", "harness-error"
            )
        promoted = history.promoted()
        result = publication.skeleton("grading did not finish")
        result.candidates = history.candidates()
        if promoted is None:
            result.status = "failed"
            result.status_reason = f"no candidate was promoted ({stop_reason}): scores 0"
            return result
        result.promoted = promoted
        archive = self.session.submissions.archive(promoted.id)
        if not archive.is_file() or sha256_file(archive) != promoted.sha256:
            return publication.invalid(
                f"the stored archive of {promoted.id} is missing or changed", "archive"
            )
        return self._grade(result, promoted.id, archive, record)

    def _grade(
        self, result: RunResult, candidate: str, archive: Path, record: SessionRecord
    ) -> RunResult:
        inputs, log = self.inputs, self.inputs.log
        self._alone_on_host()  # before the grading starts: the wait is in no published time
        self.timeline.enter(f"the final grading of {candidate}", hidden=True)
        log.hold()  # no published time tells how long the hidden grading took
        self.session.show(record.used_s)
        log(f"grading {candidate} on the exam ({inputs.spec.exam.name})")
        started = time.monotonic()
        try:
            report = self.grader.grade(
                archive,
                inputs.spec.exam,
                ("generate", "bpb"),
                ablation=True,
                hidden=True,
                progress=self.progress,  # the operator's terminal only
            )
        except Exception as exc:
            # A hidden grading: neither the text nor the traceback of a failure is published
            # (either may quote the bundle); the operator log has them, agent.log the type.
            # The bundle's code can break its own grading (a tree too slow to die): invalid
            # only if the harness's reference bundle fails too, in fresh sandboxes.
            grading_s = self._grading_time(started)
            self._until_bucket_end(grading_s)
            kind = failure_name(exc)
            secret_log.record(f"final grading of {inputs.run_id}", traceback.format_exc())
            log(
                f"grading of {candidate} raised {kind} (details: the operator log); grading "
                "the reference bundle in fresh sandboxes to tell whose failure it is"
            )
            problem = reference.grading_reference(self.grader, inputs.spec.exam)
            if problem is not None:
                log(f"the reference bundle failed too: {problem}")
                return self.publication.invalid(
                    f"grading failed (infrastructure): {kind}; the harness's reference bundle "
                    f"failed too: {problem}",
                    "grading-reference",
                )
            log("the reference bundle graded fine: the failure is the bundle's")
            result.timings.grading_s = grading_s
            result.status = "failed"
            result.status_reason = grading_charged_reason(candidate, exc)
            return result
        result.timings.grading_s = self._grading_time(started)
        self._until_bucket_end(result.timings.grading_s)
        try:  # what scored, for a reviewer to read (listed with the artifacts)
            write_promoted_code(archive, inputs.artifacts, candidate)
        except (OSError, tarfile.TarError) as exc:
            log(f"could not list the promoted bundle's code: {type(exc).__name__}")
        return self._scored(result, candidate, report)

    def _alone_on_host(self) -> None:
        """An official track's hidden grading waits until it is alone on its host, and the
        result says so (`hidden-grading-alone`); with the rate accepted, it says that."""
        if self.host_lock is None or self.inputs.spec.track.demo:
            return
        if channel_accepted():
            self.inputs.log(
                f"hidden grading beside other runs: the operator accepted {accepted_rate()}"
            )
            self.publication.isolation_note("host-channel-accepted")
            return
        self.host_lock.exclusive(waiting=self.inputs.log)
        self.publication.isolation_note("hidden-grading-alone")

    def _scored(self, result: RunResult, candidate: str, report: GradeReport) -> RunResult:
        """The result with what the grading found."""
        result.score = report.score
        result.families = {
            k: FamilyScore(passed=v.passed, total=v.total) for k, v in report.families.items()
        }
        result.bits_per_byte = report.bits_per_byte
        if report.ok:
            result.status = "valid"
            result.status_reason = None
            result.weights_ablation = report.weights_ablation
            result.model_free_suspect = report.model_free_suspect
            ablated = report.weights_ablation
            if ablated is not None:  # the published (coarse) score only: not how it went
                self.inputs.log(
                    f"weights ablation: {ablated.passed}/{ablated.total} (published coarsely), "
                    f"suspect {report.model_free_suspect}"
                )
        else:
            result.status = "failed"
            result.status_reason = (
                f"the promoted candidate {candidate} failed grading: {report.reason}"
            )
            result.score = Score(percent=0.0, passed=0, total=report.score.total)
            result.families = {}
        return result

    def _until_bucket_end(self, bucket: float) -> None:
        """Wait, before the first write after the hidden grading, until the end of the
        published `bucket` of its length (`publish.bucket_end`), counted from its published
        start (`finished_at`): every file's ctime then tells the bucket and no more. The
        host's lock goes first: the bundle's sandboxes are gone, other runs may go on."""
        if self.host_lock is not None and self.host_lock.mode == "exclusive":
            self.host_lock.release()
        began = self.timeline.hidden_since()
        if began is None or os.environ.get(WAIT_ENV) == "none":
            return
        self.publication.isolation_note("ctime-bucketed")
        params = self.grader.params
        ceiling = GRADING_PHASES * (params.load_timeout_s + params.total_timeout_s)
        end = began.timestamp() + bucket_end(bucket, ceiling)
        while (left := end - time.time()) > 0:
            time.sleep(min(left, 1.0))

    def _grading_time(self, started: float) -> float:
        """The final grading's duration as published (a coarse bucket); exact: operator log."""
        took = time.monotonic() - started
        secret_log.record(f"final grading of {self.inputs.run_id}: seconds (exact)", f"{took:.3f}")
        return coarse_seconds(took)


def grading_charged_reason(candidate: str, exc: Exception) -> str:
    """Why a promoted candidate whose grading broke (while the reference bundle graded fine)
    failed: a fixed text per kind of failure, never the exception's own (it may quote the
    bundle)."""
    kind = exc.kind if isinstance(exc, GradingError) else type(exc)
    if issubclass(kind, SandboxTeardownTimeout):
        what = "the bundle's sandbox could not be torn down in time"
    elif issubclass(kind, SandboxError):
        what = "the bundle's sandbox broke"
    else:
        what = "the harness could not grade the bundle"
    return (
        f"grading failed: {what} (candidate {candidate}; the harness's reference bundle "
        "graded fine in fresh sandboxes, so the failure is charged to the bundle)"
    )
