"""One whole run: set up, let the agent work until it stops or the clock runs out, grade, publish.

Order of events (DESIGN §5):
1. inputs: the exam (hash checked against the track), the public set, the training data (its
   hashes recorded; refused when the track pins other data); the grading parameters in force
   (the track's, with a memory cap above this host's memory lowered to it: noted in
   `agent.log`, and recorded as in force in the effective config);
2. the harness's reserve on the results volume (`toolkit.run.storage`: a preallocated file
   beside the run folder; a volume without room for it refuses the run), held until the
   session is over, so the result and the last log lines are always written;
   the workspace (on a filesystem of its own capped at the track's `workspace_disk_bytes`,
   where the host can: released when the run ends), checked for leaks (no exam text, no
   secret value anywhere in it);
3. the run folder `results/<track>/<run_id>/` (audit log, history, candidates) and a `RUNNING`
   marker in the harness folder, so a crash of this process is recorded later, not lost;
4. the runner sandbox + runner service, then the agent in the controller sandbox (both hide
   `roles.run_hidden`: the protected paths, the exam and its folder, results, banks; the
   controller gets the egress allow-list its adapter asks for: a model provider, nothing
   else); the clock starts when the agent does (`--backend docker`: each is a container of an
   image the CLI checked against the pins, and every container and network carries the run id
   as a label); with `spec.gpu` (a campaign's pin) the runner, and later the grading
   sandboxes, see that one GPU only, and the result records it (`placement`); the agent's
   console goes to the run folder as it comes (secrets redacted,
   each file capped: `toolkit.run.transcript`);
5. the agent exits, the deadline comes, or its adapter reports an infrastructure problem (a
   provider down or stalling the run, judged outside the controller: opencode's provider
   relay): everything is killed (whatever it does with signals),
   the service stops (every call still open is closed and audited); before the controller
   goes, the adapter may run a last command in it (export its session) and the egress log is
   saved; the reserve is released and the audit log's counts written; a results volume that
   filled during the session ends the run here (`failed` when the run's own files filled it,
   else `invalid` with the evidence); the history and the audit log are checked against what
   the harness wrote;
6. the adapter's last word on the provider (`final_problem`: checked once the controller is
   gone), then its host-side helpers are closed (`close`); the last promoted candidate is
   graded on the exam from the stored archive; no promotion => `failed` with 0; a harness,
   sandbox or provider failure => `invalid` with its reason; from the moment the hidden
   grading starts, nothing published tells how long it took but a coarse bucket
   (`grading.publish`; its progress goes to the operator's terminal only: `grading_progress`):
   `agent.log` stamps every later line with that moment, the result's
   `finished_at` is that moment, `timings.grading_s` is the bucket (the exact time goes to
   the operator log);
7. the result is written atomically, with the final head of the audit log and of the history
   (so that a log rewritten afterwards is caught) and the SHA-256 of every file of the run
   folder (agent.log's last line is the result's: nothing is written to it afterwards), and
   the marker removed.
"""

from __future__ import annotations

import shutil
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from toolkit.clock import Clock
from toolkit.grading.grade import fit_to_host
from toolkit.grading.phases import Progress
from toolkit.results.model import InvalidCheck, RunResult
from toolkit.run import recovery
from toolkit.run.agent_log import AgentLog, quiet
from toolkit.run.artifacts import AGENT_LOG
from toolkit.run.final_grading import RunFinalGrading
from toolkit.run.history import SubmissionHistory
from toolkit.run.live import LiveFile
from toolkit.run.spec import RunSpec, new_run_id
from toolkit.run.storage import Volume
from toolkit.run.submissions import Grader, Submissions
from toolkit.run.transcript import Transcript
from toolkit.run.workspace import Workspace
from toolkit.runner.service import RunnerService
from toolkit.sandbox import Sandbox, SandboxError, SandboxProcess, capped
from toolkit.text.data import load_prepared


class Run(RunFinalGrading):
    """One run in progress. `execute()` returns the published result."""

    def __init__(
        self,
        spec: RunSpec,
        *,
        echo: Callable[[str], None] = quiet,
        tick: Callable[[float, float], None] | None = None,
        grading_progress: Progress | None = None,
    ) -> None:
        self.spec = spec
        self.echo = echo
        self.tick = tick
        self.grading_progress = grading_progress
        self.run_id = spec.run_id or new_run_id(spec.model, spec.seed)
        self.work = recovery.runs_root() / self.run_id
        self.harness = self.work / "harness"
        self.artifacts = spec.results_dir / spec.track.id / self.run_id
        budget, per_call, reserved = spec.budget
        self.clock = Clock(budget_s=budget, reserved_s=reserved, per_call_limit_s=per_call)
        self.started_at = datetime.now(UTC)
        born = time.monotonic()  # agent.log times count from the harness's start
        self.log = AgentLog(self.artifacts / AGENT_LOG, lambda: time.monotonic() - born, echo)
        # The grading parameters in force: the track's, with a memory cap above this host's
        # memory lowered to it (as `toolkit grade` does); the effective config records these.
        grading, self.grading_notes = fit_to_host(spec.track.grading)
        self.grader = Grader(
            params=grading,
            size_limit_bytes=spec.track.size_limit_bytes,
            backend=spec.backend,
            # A pinned run grades on its own GPU: "cuda:N" pins the grading sandbox to GPU N.
            device=f"cuda:{spec.gpu}"
            if spec.gpu is not None and spec.device == "cuda"
            else spec.device,
            cpus=spec.cpus,
        )
        self.boxes: list[Sandbox] = []
        self.controller: Sandbox | None = None
        self.runner_box: Sandbox | None = None
        self.service: RunnerService | None = None
        self.live: LiveFile | None = None
        self.submissions: Submissions | None = None
        self.transcripts: list[Transcript] = []
        self.agent_process: SandboxProcess | None = None
        self.agent_problem: str | None = None
        self.step = "set-up"  # what the run is doing, for an interruption's reason
        self.published = False  # the result is written: an interruption changes nothing
        self.agent_exited = False  # by itself (not killed at the deadline or for a problem)
        self.history: SubmissionHistory | None = None
        self.workspace: Workspace | None = None
        self.workspace_cap: capped.CappedFolder | None = None
        self.volume: Volume | None = None  # the results volume: the harness's reserve on it
        self.runner_hidden: list[Path] = []  # what the runner sandbox hides, and reads only
        self.runner_readonly: list[Path] = []
        self.isolation: list[str] = []
        self.runner_s = 0.0
        self.used_s: float | None = None
        self.grading_from: datetime | None = None  # the hidden grading's start: `finished_at`
        meta = spec.data_dir / "meta.json"
        self.train_data = load_prepared(spec.data_dir).record() if meta.is_file() else None

    def execute(self) -> RunResult:
        try:
            if self.spec.backend != "docker":
                return self._execute()
            from toolkit.sandbox.docker.engine import owner_run

            with owner_run(self.run_id):  # every container and network is labelled with the run
                return self._execute()
        finally:
            self._release_workspace()
            self._release_reserve()

    def _execute(self) -> RunResult:
        try:
            return self._execute_run()
        finally:
            self._close_agent()

    def _execute_run(self) -> RunResult:
        recovery.recover_runs()  # runs whose harness died are recorded before a new one starts
        self.artifacts.mkdir(parents=True, exist_ok=False)
        try:
            self._setup()
        except BaseException:
            # Nothing ran yet: leave no half-made run folder in the results.
            self._teardown(judge=False)
            self._release_workspace()
            self._release_reserve()
            shutil.rmtree(self.artifacts, ignore_errors=True)
            shutil.rmtree(self.work, ignore_errors=True)
            raise
        self.step = "the agent's session"
        try:
            stop_reason = self._supervise()
        except BaseException as exc:
            operator = not isinstance(exc, Exception)  # Ctrl-C or SIGTERM: record, then go
            if not operator:
                self.log(f"harness error: {traceback.format_exc()}")
            problem = self._teardown()
            if operator:
                self._finish_interrupted(exc, problem)
                raise
            # The agent's code can break its own sandbox (a tree too slow to die): that ends
            # its run, and the run is graded, unless the reference check fails too.
            if (
                isinstance(exc, SandboxError)
                and problem is None
                and self._runner_reference() is None
            ):
                self.used_s = self.used_s if self.used_s is not None else self.clock.elapsed()
                self.log("the agent's sandbox broke, the reference check passed: grading")
                why = f"the agent's sandbox broke ({type(exc).__name__})"
                return self._guarded(lambda: self._conclude(why, None))
            charged = self._charge_storage()  # a write the run's own files made impossible
            if charged is not None:
                return charged
            reason = f"harness error during the run: {exc}"
            check: InvalidCheck = "harness-error"
            if isinstance(exc, SandboxError) and problem is None:
                check = "runner-reference"  # the reference check above failed too
            elif problem is not None:
                check = "runner-reference"  # the teardown's reference check failed
            return self._finish_invalid(reason + (f"; {problem}" if problem else ""), check)
        return self._guarded(lambda: self._after_session(stop_reason))

    def _guarded(self, finish: Callable[[], RunResult]) -> RunResult:
        """`finish()`; stopped meanwhile (grading, publishing), the run is recorded at once,
        with what was happening, not left for a later `runs recover`."""
        try:
            return finish()
        except BaseException as exc:
            if not isinstance(exc, Exception) and not self.published:
                self._finish_interrupted(exc, None)
            raise

    def _after_session(self, stop_reason: str) -> RunResult:
        self.step = "the end of the session"
        return self._conclude(stop_reason, self._teardown())

    def _conclude(self, stop_reason: str, problem: str | None) -> RunResult:
        """After the teardown (`problem`: what it found wrong): the adapter's last word on
        the provider, then the grading."""
        if problem:
            return self._finish_invalid(problem, "runner-reference")
        agent_problem = self.agent_problem or self.spec.agent.final_problem(self.agent_exited)
        self._close_agent()
        if agent_problem:  # infrastructure (the provider), not the model: rerun, never a 0
            if not self.agent_problem:  # found now (else logged when the agent was stopped)
                self.log(f"agent infrastructure problem: {agent_problem}", shown="")
            return self._finish_invalid(agent_problem, "provider")
        return self._grade_and_publish(stop_reason)


def execute_run(
    spec: RunSpec,
    *,
    echo: Callable[[str], None] = quiet,
    tick: Callable[[float, float], None] | None = None,
    grading_progress: Progress | None = None,
) -> RunResult:
    """Run one agent under `spec` and return the published result. `grading_progress` gets
    the final grading's steps (phase, done, total) for the operator's terminal: nothing the
    run publishes or the agent sees."""
    return Run(spec, echo=echo, tick=tick, grading_progress=grading_progress).execute()
