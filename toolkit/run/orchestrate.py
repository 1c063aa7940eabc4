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
3. the run folder `results/<track>/<run_id>/` (audit log, history, candidates);
4. the runner sandbox and the controller sandbox (both hide `roles.run_hidden`: the protected
   paths, the exam and its folder, results, banks; the controller gets the egress allow-list
   its adapter asks for: a model provider, nothing else), checked against the track's
   isolation floor; a `RUNNING` marker in the harness folder, so a crash of this process from
   here on is recorded later, not lost; then the runner service, and the agent in the
   controller; the clock starts with them (`--backend docker`: each is a container of an
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
   saved; the reserve is released and the audit log's counts written;
6. the adapter's last word on the provider (`final_problem`: checked once the controller is
   gone), then its host-side helpers are closed (`close`); a results volume that filled
   during the session ends the run here (`failed` when the run's own files filled it, else
   `invalid` with the evidence); the history and the audit log are checked against what the
   harness wrote; the last promoted candidate is
   graded on the exam from the stored archive; no promotion => `failed` with 0; a harness,
   sandbox or provider failure => `invalid` with its reason; from the moment the hidden
   grading starts, nothing published tells how long it took but a coarse bucket
   (`grading.publish`; its progress goes to the operator's terminal only: `grading_progress`):
   `agent.log` stamps every later line with that moment, the result's
   `finished_at` is that moment, `timings.grading_s` is the bucket (the exact time goes to
   the operator log), and nothing is written after the grading until the bucket's end (a
   file's ctime cannot be set back). On an official track the hidden grading first waits
   until it is alone on its host (`host.grading_lock`: every run holds that lock shared from
   before its sandboxes exist to its end; the grading holds it alone until it is over);
7. the result is written atomically, with the final head of the audit log and of the history
   (so that a log rewritten afterwards is caught) and the SHA-256 of every file of the run
   folder (agent.log's last line is the result's: nothing is written to it afterwards), and
   the marker removed.

Each step is a part that takes what it needs and returns what it made, and `Run` calls them
in this order: `start.read_inputs` (1) -> `RunInputs`; `start.take_premises` (2-3) ->
`Premises` (the reserve, the workspace, the history); `sandboxes.make_sandboxes` (4) ->
`RunSandboxes`; `supervise.Session` (4-5: the clock, the service, the agent) -> `Stop`;
`teardown.teardown` (5) -> `TeardownRecord`; `final_grading.FinalGrading` (6) -> the result
to publish; `outcome.Publication` (7) publishes it (or an ending without a grading). The
`live.Timeline` says which step the run is in.
"""

from __future__ import annotations

import contextlib
import shutil
import traceback
from collections.abc import Callable
from dataclasses import dataclass

from toolkit.grading.phases import Progress
from toolkit.host.grading_lock import HostLock
from toolkit.results.model import InvalidCheck, RunResult
from toolkit.run import recovery
from toolkit.run.agent_log import quiet
from toolkit.run.final_grading import FinalGrading
from toolkit.run.live import Timeline
from toolkit.run.outcome import Publication
from toolkit.run.sandboxes import RunSandboxes, make_sandboxes, runner_reference
from toolkit.run.spec import RunSpec
from toolkit.run.start import Premises, RunInputs, read_inputs, take_premises
from toolkit.run.supervise import AgentProcess, Session, Stop
from toolkit.run.teardown import TeardownRecord, close_agent, teardown
from toolkit.sandbox import SandboxError


@dataclass(frozen=True)
class RunParts:
    """What the set-up made (steps 2-4), for the steps after it."""

    premises: Premises
    sandboxes: RunSandboxes
    publication: Publication
    session: Session


class Run:
    """One run: the steps of the module's docstring, in order. `execute()` returns the
    published result."""

    def __init__(
        self,
        spec: RunSpec,
        *,
        echo: Callable[[str], None] = quiet,
        tick: Callable[[float, float], None] | None = None,
        grading_progress: Progress | None = None,
    ) -> None:
        self.inputs: RunInputs = read_inputs(spec, echo)  # 1.
        self.tick = tick
        self.grading_progress = grading_progress
        self.timeline = Timeline()  # the step the run is in: live view, interruptions
        self.host_lock = HostLock()

    def execute(self) -> RunResult:
        if self.inputs.spec.backend != "docker":
            return self._execute()
        from toolkit.sandbox.docker.engine import owner_run

        with owner_run(self.inputs.run_id):  # every container and network carries the run id
            return self._execute()

    def _execute(self) -> RunResult:
        # Held shared while this run's sandboxes live; an official hidden grading holds it
        # alone (`grading_lock`): no other run's agent works beside it on this host.
        self.host_lock.share()
        try:
            return self._execute_shared()
        finally:
            self.host_lock.release()

    def _execute_shared(self) -> RunResult:
        inputs = self.inputs
        try:
            parts = self._set_up()
        except BaseException:
            close_agent(inputs.spec.agent, inputs.log)
            raise
        try:
            try:
                return self._session(parts)
            finally:
                close_agent(inputs.spec.agent, inputs.log)  # the host-side helpers go
        finally:
            parts.premises.release()  # the workspace's cap (its files with it), the reserve

    def _set_up(self) -> RunParts:
        """Steps 2-4 up to the agent's start. Nothing ran yet: a failure leaves no half-made
        run folder."""
        inputs = self.inputs
        recovery.recover_runs()  # runs whose harness died are recorded before a new one starts
        inputs.artifacts.mkdir(parents=True, exist_ok=False)
        try:
            with contextlib.ExitStack() as undo:
                premises = take_premises(inputs)  # 2.-3.
                undo.callback(premises.release)
                sandboxes = make_sandboxes(inputs, premises)  # 4.
                undo.callback(sandboxes.cleanup)
                publication = Publication(inputs, premises, sandboxes.isolation, self.timeline)
                session = Session(inputs, premises, sandboxes, self.timeline)
                # Before any process starts: from here on, a crash of this harness is
                # recoverable.
                recovery.write_marker(inputs.harness, publication.marker())
                undo.pop_all()
        except BaseException:
            shutil.rmtree(inputs.artifacts, ignore_errors=True)
            shutil.rmtree(inputs.work, ignore_errors=True)
            raise
        return RunParts(premises, sandboxes, publication, session)

    def _session(self, parts: RunParts) -> RunResult:
        """Steps 4-5: the agent's session, then what follows it."""
        session = parts.session
        self.timeline.enter("the agent's session")
        agent: AgentProcess | None = None
        try:
            agent = session.start()  # 4.
            stop = session.watch(agent, self.tick)  # 5.
        except Exception as exc:
            return self._broken(parts, agent, exc)
        except BaseException as exc:  # Ctrl-C or SIGTERM: record, then go
            torn = self._teardown(parts, agent)
            publication = parts.publication
            publication.publish(publication.interrupted(exc, torn.problem), session.record(None))
            raise
        started = agent
        return self._guarded(parts, stop, lambda: self._after_session(parts, started, stop))

    def _teardown(self, parts: RunParts, agent: AgentProcess | None) -> TeardownRecord:
        return teardown(self.inputs, parts.premises, parts.sandboxes, parts.session, agent)

    def _broken(self, parts: RunParts, agent: AgentProcess | None, exc: Exception) -> RunResult:
        """The session raised: torn down, then graded when it was the agent's sandbox that
        broke (and the reference check passes), else `invalid` (or charged to a full volume)."""
        log, publication = self.inputs.log, parts.publication
        log(f"harness error: {traceback.format_exc()}")
        problem = self._teardown(parts, agent).problem
        # The agent's code can break its own sandbox (a tree too slow to die): that ends
        # its run, and the run is graded, unless the reference check fails too.
        if (
            isinstance(exc, SandboxError)
            and problem is None
            and runner_reference(self.inputs, parts.sandboxes) is None
        ):
            used = parts.session.clock.elapsed()
            log("the agent's sandbox broke, the reference check passed: grading")
            why = f"the agent's sandbox broke ({type(exc).__name__})"
            stop = Stop(why, used, agent_exited=False, agent_problem=None)
            return self._guarded(parts, stop, lambda: self._conclude(parts, stop, None))
        charged = publication.storage_charge()  # a write the run's own files made impossible
        record = parts.session.record(None)
        if charged is not None:
            return publication.publish(charged, record)
        reason = f"harness error during the run: {exc}"
        check: InvalidCheck = "harness-error"
        if isinstance(exc, SandboxError) and problem is None:
            check = "runner-reference"  # the reference check above failed too
        elif problem is not None:
            check = "runner-reference"  # the teardown's reference check failed
        result = publication.invalid(reason + (f"; {problem}" if problem else ""), check)
        return publication.publish(result, record)

    def _guarded(self, parts: RunParts, stop: Stop, finish: Callable[[], RunResult]) -> RunResult:
        """`finish()`; stopped meanwhile (grading, publishing), the run is recorded at once,
        with what was happening, not left for a later `runs recover`."""
        try:
            return finish()
        except BaseException as exc:
            publication = parts.publication
            if not isinstance(exc, Exception) and not publication.published:
                record = parts.session.record(stop.used_s)
                publication.publish(publication.interrupted(exc, None), record)
            raise

    def _after_session(self, parts: RunParts, agent: AgentProcess, stop: Stop) -> RunResult:
        self.timeline.enter("the end of the session")
        return self._conclude(parts, stop, self._teardown(parts, agent).problem)  # 5.

    def _conclude(self, parts: RunParts, stop: Stop, problem: str | None) -> RunResult:
        """Steps 6-7, after the teardown (`problem`: what it found wrong): the adapter's last
        word on the provider, then the grading, then the result."""
        inputs, publication = self.inputs, parts.publication
        record = parts.session.record(stop.used_s)
        if problem:
            return publication.publish(publication.invalid(problem, "runner-reference"), record)
        agent_problem = stop.agent_problem or inputs.spec.agent.final_problem(stop.agent_exited)
        close_agent(inputs.spec.agent, inputs.log)
        if agent_problem:  # infrastructure (the provider), not the model: rerun, never a 0
            if not stop.agent_problem:  # found now (else logged when the agent was stopped)
                inputs.log(f"agent infrastructure problem: {agent_problem}", shown="")
            return publication.publish(publication.invalid(agent_problem, "provider"), record)
        grading = FinalGrading(
            inputs=inputs,
            grader=parts.sandboxes.grader,
            history=parts.premises.history,
            session=parts.session,
            publication=publication,
            timeline=self.timeline,
            progress=self.grading_progress,
            host_lock=self.host_lock,
        )
        return publication.publish(grading.result(stop.reason, record), record)  # 6.-7.


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
