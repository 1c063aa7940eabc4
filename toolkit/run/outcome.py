"""A run's result (`orchestrate`, step 7): the skeleton every result starts from, the endings
that need no grading (invalid, interrupted, a full results volume), and publishing it, once
(`Publication`), with what the session's record says of its times (`SessionRecord`).
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from exam_builder.exam_file import load_exam, sha256_file
from toolkit import __version__
from toolkit.results.model import (
    EffectiveConfig,
    InvalidCheck,
    InvalidEvidence,
    Placement,
    RunResult,
    Score,
    Timings,
    save_run,
)
from toolkit.results.signing import keyring_path
from toolkit.run import recovery
from toolkit.run.agent_log import STATUS_REASON_CHARS, bounded
from toolkit.run.artifacts import TRANSCRIPT_FILE, file_hashes, list_artifacts, log_heads
from toolkit.run.interrupt import interrupted_by
from toolkit.run.journal import STOP_FILE
from toolkit.run.live import Timeline
from toolkit.run.spec import git_commit
from toolkit.run.start import Premises, RunInputs
from toolkit.run.transcript import TRANSCRIPT_CAP_BYTES


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


@dataclass(frozen=True)
class SessionRecord:
    """What the result says of the agent's session (`supervise.Session.record`)."""

    started_at: datetime
    """When the clock started (with the agent)."""
    used_s: float
    """The session's length, at most the budget."""
    runner_s: float
    """Seconds of `runner` compute, all calls together."""


class Publication:
    """The run's result: made from the inputs, the premises and the sandboxes' isolation,
    published once (`published`), with the times of the session's record and of the
    `timeline` (a hidden grading's start is the result's end)."""

    def __init__(
        self,
        inputs: RunInputs,
        premises: Premises,
        isolation: Sequence[str],
        timeline: Timeline,
    ) -> None:
        self._inputs = inputs
        self._premises = premises
        self._isolation = list(isolation)
        self._timeline = timeline
        self.published = False
        """The result is written: an interruption changes nothing any more."""

    def isolation_note(self, item: str) -> None:
        """Record one more protection in force (the result's `config.isolation`)."""
        if item not in self._isolation:
            self._isolation.append(item)

    def skeleton(self, status_reason: str) -> RunResult:
        """The result as far as the run's set-up knows it: `invalid` for `status_reason`,
        scoring 0, with the effective config."""
        inputs = self._inputs
        spec, track = inputs.spec, inputs.spec.track
        budget, per_call, reserved = spec.budget
        exam_questions = len(load_exam(spec.exam))
        return RunResult(
            run_id=inputs.run_id,
            track=track.id,
            model=spec.model,
            provider=spec.agent.provider,
            effort=spec.effort,
            agent=spec.agent.name,
            agent_version=spec.agent.version,
            seed=spec.seed,
            started_at=inputs.started_at,
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
                task_brief_sha256=self._premises.workspace.task_brief_sha256,
                scaffold_version=spec.agent.version,
                scaffold_config_sha256=spec.agent.config_sha256(),
                exam_sha256=sha256_file(spec.exam),
                public_set_sha256=sha256_file(spec.public_set),
                grading={
                    **inputs.grader.params.model_dump(),
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
                isolation=self._isolation,
                protocol_revision=track.protocol_revision,
                train_data=inputs.train_data,
            ),
            # Only what exists: an agent that never called `runner` leaves no audit log.
            artifacts=list_artifacts(inputs.artifacts, inputs.run_id),
            placement=Placement(
                node=spec.node or socket.gethostname(), gpu=spec.gpu, cpus=spec.cpus
            ),
        )

    def invalid(self, reason: str, check: InvalidCheck) -> RunResult:
        """The run as `invalid`, with the check that showed it (signed)."""
        result = self.skeleton(reason)
        result.evidence = InvalidEvidence(check=check, detail=bounded(reason, 2000))
        return result

    def interrupted(self, exc: BaseException, problem: str | None) -> RunResult:
        """A run stopped from outside: `invalid`, `interrupted`, saying by what and during
        which step (a campaign reruns it without counting an attempt)."""
        try:  # `toolkit runs kill` says why before it signals
            what = (self._inputs.harness / STOP_FILE).read_text(encoding="utf-8").strip()[:200]
        except OSError:
            what = interrupted_by(exc)
        reason = f"the run was interrupted during {self._timeline.current} ({what})"
        result = self.skeleton(reason + (f"; {problem}" if problem else ""))
        result.interrupted = True
        result.evidence = InvalidEvidence(check="interrupted", detail=bounded(reason, 2000))
        return result

    def storage_charge(self) -> RunResult | None:
        """If the results volume filled during the run: `failed` when the run's own files
        filled it, `invalid` (evidence: storage) when something else did; else None."""
        blame = self._premises.volume.blame()
        if blame is None:
            return None
        whose, reason = blame
        self._inputs.log(reason)
        if whose == "harness":
            return self.invalid(reason, "storage")
        result = self.skeleton(reason)
        result.status = "failed"
        return result

    def publish(self, result: RunResult, record: SessionRecord) -> RunResult:
        """Write `result` (atomically, signed), with the session's times, the run folder's
        files and the heads of its chained logs; the crash marker goes."""
        inputs, history = self._inputs, self._premises.history
        artifacts = inputs.artifacts
        hidden_from = self._timeline.hidden_since()
        result.candidates = history.candidates()
        result.promoted = result.promoted or history.promoted()
        result.finished_at = hidden_from or datetime.now(UTC)
        result.started_at = record.started_at
        result.timings.used_s = round(record.used_s, 3)
        result.timings.runner_s = round(record.runner_s, 3)
        result.config.isolation = self._isolation
        if result.status_reason is not None:  # it may quote the agent: bounded
            result.status_reason = bounded(result.status_reason, STATUS_REASON_CHARS)
        transcript = artifacts / TRANSCRIPT_FILE
        text = _read_head(transcript, TRANSCRIPT_CAP_BYTES + 4096)  # capped as it was written
        outcome = inputs.spec.agent.collect(inputs.work / "workspace", text)
        result.usage = outcome.usage
        if outcome.transcript is not None and outcome.transcript != text:
            transcript.write_text(outcome.transcript, encoding="utf-8")
        reason = f" ({result.status_reason})" if result.status_reason else ""
        # Not echoed: the command prints the result, its reason once. The last line of
        # agent.log: what comes after is not published (the file is hashed next).
        inputs.log(f"result: {result.status} {result.score.percent:.1f}%{reason}", shown="")
        inputs.log.seal()
        result.artifacts = list_artifacts(artifacts, inputs.run_id)  # all there is, now
        # Where the chained logs end now: a log rewritten later, even with fresh hashes, won't.
        result.logs = log_heads(artifacts.parent, result.artifacts)
        result.files = file_hashes(artifacts, inputs.run_id)  # every byte, signed
        # Fields were set one by one: validate the whole before it is published.
        result = RunResult.model_validate(result.model_dump())
        saved = save_run(result, inputs.spec.results_dir)
        self.published = True
        recovery.clear_marker(inputs.harness)
        if hidden_from is not None:  # the last write to the run's files is done
            results = inputs.spec.results_dir
            _backdate(
                [saved, *artifacts.rglob("*"), artifacts],
                hidden_from.timestamp(),
                shared=[saved.parent, keyring_path(results), results],
            )
        return result

    def marker(self) -> recovery.Marker:
        """The crash marker: what `runs recover` publishes should this harness die."""
        inputs = self._inputs
        return recovery.Marker(
            pid=os.getpid(),
            pid_start=recovery.process_start(os.getpid()),
            results_dir=str(inputs.spec.results_dir.resolve()),
            artifacts=str(inputs.artifacts.resolve()),
            skeleton=self.skeleton("the harness died before the run finished"),
        )
