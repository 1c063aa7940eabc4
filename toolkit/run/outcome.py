"""A run's state and its result: the skeleton every result starts from, publishing it (once),
the endings that publish without a grading (invalid, interrupted), and the results volume's
reserve and storage charge.

A run in progress (`orchestrate.Run`) is one object built in layers, one module each, each
using only those below: the result (here), set-up (`start`), supervision (`supervise`),
teardown (`teardown`), the final grading (`final_grading`), and the sequence of them
(`orchestrate`). `RunState` declares what a run holds; `Run.__init__` sets it.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from exam_builder.exam_file import load_exam, sha256_file
from toolkit import __version__
from toolkit.clock import Clock
from toolkit.grading.phases import Progress
from toolkit.results.model import (
    EffectiveConfig,
    InvalidCheck,
    InvalidEvidence,
    Placement,
    RunResult,
    Score,
    Timings,
    TrainData,
    save_run,
)
from toolkit.results.signing import keyring_path
from toolkit.run import recovery
from toolkit.run.agent_log import STATUS_REASON_CHARS, AgentLog, bounded
from toolkit.run.artifacts import TRANSCRIPT_FILE, file_hashes, list_artifacts, log_heads
from toolkit.run.history import SubmissionHistory
from toolkit.run.interrupt import interrupted_by
from toolkit.run.journal import STOP_FILE
from toolkit.run.live import LiveFile
from toolkit.run.spec import RunSpec, git_commit
from toolkit.run.storage import Volume
from toolkit.run.submissions import Grader, Submissions
from toolkit.run.transcript import TRANSCRIPT_CAP_BYTES, Transcript
from toolkit.run.workspace import Workspace
from toolkit.runner.service import RunnerService
from toolkit.sandbox import Sandbox, SandboxProcess, capped


def _backdate(paths: list[Path], when: float, shared: list[Path]) -> None:
    """Give what a run published after its hidden grading began that beginning as its time: a
    web server, a copy or a git client shows a file's or a folder's time, and a bundle that
    slept through its grading would otherwise publish how long it slept.

    `paths` are the run's own (its result, every file and folder of its run folder, the run
    folder itself; setting a time changes no folder's time). `shared` are folders
    and files other runs write too (the track folder, the results folder and its key list):
    one later than `when` was touched by this publishing (or by another run's, whose own
    publishing sets it back in turn) and is set back; an earlier one is left as it is."""
    for path in paths:
        # A file gone meanwhile, or not ours to touch, publishes nothing through its time.
        with contextlib.suppress(OSError):
            os.utime(path, (when, when), follow_symlinks=False)
    for path in shared:
        with contextlib.suppress(OSError):
            if os.stat(path, follow_symlinks=False).st_mtime > when:
                os.utime(path, (when, when), follow_symlinks=False)


def _read_head(path: Path, limit: int) -> str:
    """The text of `path`, at most `limit` bytes of it ("" if there is no such file)."""
    try:
        with path.open("rb") as f:
            return f.read(limit).decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""


class RunState:
    """What a run in progress holds (set by `Run.__init__`), and its result's making."""

    spec: RunSpec
    echo: Callable[[str], None]
    tick: Callable[[float, float], None] | None
    grading_progress: Progress | None
    """The final grading's progress, for the operator's terminal only (never agent.log)."""
    run_id: str
    work: Path
    harness: Path
    artifacts: Path
    clock: Clock
    started_at: datetime
    log: AgentLog
    grading_notes: list[str]
    grader: Grader
    boxes: list[Sandbox]
    controller: Sandbox | None
    runner_box: Sandbox | None
    service: RunnerService | None
    live: LiveFile | None
    submissions: Submissions | None
    transcripts: list[Transcript]
    agent_process: SandboxProcess | None
    agent_problem: str | None
    step: str
    published: bool
    agent_exited: bool
    history: SubmissionHistory | None
    workspace: Workspace | None
    workspace_cap: capped.CappedFolder | None
    volume: Volume | None
    runner_hidden: list[Path]
    runner_readonly: list[Path]
    isolation: list[str]
    runner_s: float
    used_s: float | None
    grading_from: datetime | None
    train_data: TrainData | None

    def skeleton(self, status_reason: str) -> RunResult:
        spec, track = self.spec, self.spec.track
        budget, per_call, reserved = spec.budget
        ws = self.workspace
        exam_questions = len(load_exam(spec.exam))
        return RunResult(
            run_id=self.run_id,
            track=track.id,
            model=spec.model,
            provider=spec.agent.provider,
            effort=spec.effort,
            agent=spec.agent.name,
            agent_version=spec.agent.version,
            seed=spec.seed,
            started_at=self.started_at,
            status="invalid",
            status_reason=status_reason,
            score=Score(percent=0.0, passed=0, total=exam_questions),
            timings=Timings(budget_s=budget, used_s=0.0, runner_s=0.0),
            config=EffectiveConfig(
                toolkit_version=__version__,
                git_commit=git_commit(),
                image_digests=dict(spec.image_digests)
                if spec.image_digests
                else {"controller": None, "runner": None, "grader": None},
                task_brief_sha256=ws.task_brief_sha256 if ws else "0" * 64,
                scaffold_version=spec.agent.version,
                scaffold_config_sha256=spec.agent.config_sha256(),
                exam_sha256=sha256_file(spec.exam),
                public_set_sha256=sha256_file(spec.public_set),
                grading={
                    **self.grader.params.model_dump(),
                    "size_limit_bytes": track.size_limit_bytes,
                    "device": spec.device,
                },
                budget={
                    "budget_s": budget,
                    "per_call_limit_s": per_call,
                    "reserved_s": reserved,
                    "track_budget_s": track.budget_s,
                    "overridden": int(
                        (budget, per_call, reserved)
                        != (track.budget_s, track.per_call_limit_s, track.reserved_s)
                    ),
                },
                backend="docker" if spec.backend == "docker" else "local",
                isolation=self.isolation,
                protocol_revision=track.protocol_revision,
                train_data=self.train_data,
            ),
            # Only what exists: an agent that never called `runner` leaves no audit log.
            artifacts=list_artifacts(self.artifacts, self.run_id),
            placement=Placement(
                node=spec.node or socket.gethostname(), gpu=spec.gpu, cpus=spec.cpus
            ),
        )

    def _publish(self, result: RunResult) -> RunResult:
        if self.history is not None:
            result.candidates = self.history.candidates()
            result.promoted = result.promoted or self.history.promoted()
        result.finished_at = self.grading_from or datetime.now(UTC)
        result.started_at = self.started_at
        used = self.used_s if self.used_s is not None else self.clock.elapsed()
        result.timings.used_s = round(min(used, self.clock.budget_s), 3)
        result.timings.runner_s = round(self.runner_s, 3)
        result.config.isolation = self.isolation
        if result.status_reason is not None:  # it may quote the agent: bounded
            result.status_reason = bounded(result.status_reason, STATUS_REASON_CHARS)
        transcript = self.artifacts / TRANSCRIPT_FILE
        text = _read_head(transcript, TRANSCRIPT_CAP_BYTES + 4096)  # capped as it was written
        outcome = self.spec.agent.collect(self.work / "workspace", text)
        result.usage = outcome.usage
        if outcome.transcript is not None and outcome.transcript != text:
            transcript.write_text(outcome.transcript, encoding="utf-8")
        reason = f" ({result.status_reason})" if result.status_reason else ""
        # Not echoed: the command prints the result, its reason once. The last line of
        # agent.log: what comes after is not published (the file is hashed next).
        self.log(f"result: {result.status} {result.score.percent:.1f}%{reason}", shown="")
        self.log.seal()
        result.artifacts = list_artifacts(self.artifacts, self.run_id)  # all there is, now
        # Where the chained logs end now: a log rewritten later, even with fresh hashes, won't.
        result.logs = log_heads(self.artifacts.parent, result.artifacts)
        result.files = file_hashes(self.artifacts, self.run_id)  # every byte, signed
        # Fields were set one by one: validate the whole before it is published.
        result = RunResult.model_validate(result.model_dump())
        saved = save_run(result, self.spec.results_dir)
        self.published = True
        recovery.clear_marker(self.harness)
        if self.grading_from is not None:  # the last write to the run's files is done
            results = self.spec.results_dir
            _backdate(
                [saved, *self.artifacts.rglob("*"), self.artifacts],
                self.grading_from.timestamp(),
                shared=[saved.parent, keyring_path(results), results],
            )
        return result

    def _finish_invalid(self, reason: str, check: InvalidCheck) -> RunResult:
        """Publish the run as `invalid`, with the check that showed it (signed)."""
        result = self.skeleton(reason)
        result.evidence = InvalidEvidence(check=check, detail=bounded(reason, 2000))
        return self._publish(result)

    def _finish_interrupted(self, exc: BaseException, problem: str | None) -> None:
        """Record a run stopped from outside as `invalid`, `interrupted`, saying by what and
        during which step (a campaign reruns it without counting an attempt)."""
        try:  # `toolkit runs kill` says why before it signals
            what = (self.harness / STOP_FILE).read_text(encoding="utf-8").strip()[:200]
        except OSError:
            what = interrupted_by(exc)
        reason = f"the run was interrupted during {self.step} ({what})"
        result = self.skeleton(reason + (f"; {problem}" if problem else ""))
        result.interrupted = True
        result.evidence = InvalidEvidence(check="interrupted", detail=bounded(reason, 2000))
        self._publish(result)

    def _release_reserve(self) -> None:
        """The harness's reserve on the results volume goes back (what is left to write is
        the harness's own: the last log lines, the audit log's counts, the result)."""
        if self.volume is not None:
            self.volume.release_reserve()

    def _release_workspace(self) -> None:
        """The workspace's size cap is gone with the run (its files with it)."""
        if self.workspace_cap is not None:
            self.workspace_cap.release()
            self.workspace_cap = None

    def _on_full(self, what: str) -> None:
        """A write the full results volume refused: noted, judged when the session ends."""
        assert self.volume is not None
        first = self.volume.refused == 0
        self.volume.note_full(what)
        if first:
            self.log(f"the results volume is full: {what} could not be written")

    def _charge_storage(self) -> RunResult | None:
        """If the results volume filled during the run: `failed` when the run's own files
        filled it, `invalid` (evidence: storage) when something else did; else None."""
        blame = self.volume.blame() if self.volume is not None else None
        if blame is None:
            return None
        whose, reason = blame
        self.log(reason)
        if whose == "harness":
            return self._finish_invalid(reason, "storage")
        result = self.skeleton(reason)
        result.status = "failed"
        return self._publish(result)
