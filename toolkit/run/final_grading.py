"""The final grading and the result: the last promoted candidate graded on the exam from its
stored archive (hidden: from its start, nothing published tells how long it took but a coarse
bucket), then the result published.
"""

from __future__ import annotations

import tarfile
import time
import traceback
from datetime import UTC, datetime

from exam_builder.exam_file import sha256_file
from toolkit.grading import secret_log
from toolkit.grading.grade import GradingError, failure_name
from toolkit.grading.publish import coarse_seconds
from toolkit.results.chain import ChainError
from toolkit.results.model import FamilyScore, RunResult, Score
from toolkit.run import reference
from toolkit.run.artifacts import write_promoted_code
from toolkit.run.teardown import RunTeardown
from toolkit.sandbox import SandboxError, SandboxTeardownTimeout


class RunFinalGrading(RunTeardown):
    """The final-grading layer of `orchestrate.Run`."""

    def _grade_and_publish(self, stop_reason: str) -> RunResult:
        assert self.history is not None
        charged = self._charge_storage()
        if charged is not None:
            return charged
        try:
            self.history.verify()
            if self.service is not None:
                self.service.audit.verify()
        except ChainError as exc:
            return self._finish_invalid(f"a run log was altered during the run: {exc}", "run-log")
        if self.service is not None and self.service.infra_errors:
            errors = "; ".join(self.service.infra_errors[:3])
            return self._finish_invalid(
                f"infrastructure error during the run: {errors}", "harness-error"
            )
        promoted = self.history.promoted()
        result = self.skeleton("grading did not finish")
        result.candidates = self.history.candidates()
        if promoted is None:
            result.status = "failed"
            result.status_reason = f"no candidate was promoted ({stop_reason}): scores 0"
            return self._publish(result)
        result.promoted = promoted
        assert self.submissions is not None
        archive = self.submissions.archive(promoted.id)
        if not archive.is_file() or sha256_file(archive) != promoted.sha256:
            return self._finish_invalid(
                f"the stored archive of {promoted.id} is missing or changed", "archive"
            )
        self.step = f"the final grading of {promoted.id}"
        self.log.hold()  # no published time tells how long the hidden grading took
        self.grading_from = datetime.now(UTC)
        self._show_live()
        self.log(f"grading {promoted.id} on the exam ({self.spec.exam.name})")
        started = time.monotonic()
        try:
            report = self.grader.grade(
                archive,
                self.spec.exam,
                ("generate", "bpb"),
                ablation=True,
                hidden=True,
                progress=self.grading_progress,  # the operator's terminal only
            )
        except Exception as exc:
            # A hidden grading: neither the text nor the traceback of a failure is published
            # (either may quote the bundle); the operator log has them, agent.log the type.
            # The bundle's code can break its own grading (a tree too slow to die): invalid
            # only if the harness's reference bundle fails too, in fresh sandboxes.
            kind = failure_name(exc)
            secret_log.record(f"final grading of {self.run_id}", traceback.format_exc())
            self.log(
                f"grading of {promoted.id} raised {kind} (details: the operator log); grading "
                "the reference bundle in fresh sandboxes to tell whose failure it is"
            )
            problem = reference.grading_reference(self.grader, self.spec.exam)
            if problem is not None:
                self.log(f"the reference bundle failed too: {problem}")
                return self._finish_invalid(
                    f"grading failed (infrastructure): {kind}; the harness's reference bundle "
                    f"failed too: {problem}",
                    "grading-reference",
                )
            self.log("the reference bundle graded fine: the failure is the bundle's")
            result.timings.grading_s = self._grading_time(started)
            result.status = "failed"
            result.status_reason = grading_charged_reason(promoted.id, exc)
            return self._publish(result)
        result.timings.grading_s = self._grading_time(started)
        try:  # what scored, for a reviewer to read (listed with the artifacts)
            write_promoted_code(archive, self.artifacts, promoted.id)
        except (OSError, tarfile.TarError) as exc:
            self.log(f"could not list the promoted bundle's code: {type(exc).__name__}")
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
                self.log(
                    f"weights ablation: {ablated.passed}/{ablated.total} (published coarsely), "
                    f"suspect {report.model_free_suspect}"
                )
        else:
            result.status = "failed"
            result.status_reason = (
                f"the promoted candidate {promoted.id} failed grading: {report.reason}"
            )
            result.score = Score(percent=0.0, passed=0, total=report.score.total)
            result.families = {}
        return self._publish(result)

    def _grading_time(self, started: float) -> float:
        """The final grading's duration as published (a coarse bucket); exact: operator log."""
        took = time.monotonic() - started
        secret_log.record(f"final grading of {self.run_id}: seconds (exact)", f"{took:.3f}")
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
