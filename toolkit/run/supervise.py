"""The agent's session (`orchestrate`, steps 4-5): the clock, the runner service and the
submissions it takes, the agent started in the controller with its console followed as it
comes, and the live view, until the agent exits, the deadline comes or its adapter reports an
infrastructure problem (`Stop`).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from dataclasses import dataclass

from toolkit.clock import Clock
from toolkit.results.chain import ChainedLog
from toolkit.run import recovery
from toolkit.run.artifacts import AUDIT_FILE, CANDIDATES_DIR
from toolkit.run.live import LiveFile, Timeline
from toolkit.run.outcome import SessionRecord
from toolkit.run.sandboxes import RunSandboxes, runner_reference, start_runner_process
from toolkit.run.start import Premises, RunInputs, volume_full_note
from toolkit.run.submissions import Submissions
from toolkit.run.transcript import Transcript
from toolkit.runner.service import RunnerService
from toolkit.sandbox import Sandbox, SandboxProcess


@dataclass(frozen=True)
class AgentProcess:
    """The agent's process in the controller, and the files its console goes to."""

    process: SandboxProcess
    transcripts: tuple[Transcript, ...]


@dataclass(frozen=True)
class Stop:
    """Why and when the session ended."""

    reason: str
    """In words, for a result with nothing promoted ("deadline", "the agent exited ...")."""
    used_s: float
    agent_exited: bool
    """By itself (not killed at the deadline or for a problem)."""
    agent_problem: str | None
    """The infrastructure problem its adapter reported (a provider down), if that ended it."""


class Session:
    """The agent's session: made before it starts (the clock starts here), then `start()`
    and `watch()`; `record()` says what the result reports of it."""

    def __init__(
        self,
        inputs: RunInputs,
        premises: Premises,
        sandboxes: RunSandboxes,
        timeline: Timeline,
    ) -> None:
        spec = inputs.spec
        budget, per_call, reserved = spec.budget
        on_full = volume_full_note(premises.volume, inputs.log)
        self.clock = Clock(budget_s=budget, reserved_s=reserved, per_call_limit_s=per_call)
        self.submissions = Submissions(
            workspace=premises.workspace.root,
            store=inputs.artifacts / CANDIDATES_DIR,
            history=premises.history,
            clock=self.clock,
            grader=sandboxes.grader,
            public_set=spec.public_set,
            log=inputs.log,
            max_candidates=spec.track.max_candidates,
            max_candidate_bytes=spec.track.max_candidate_bytes,
            on_full=on_full,
        )
        self.service = RunnerService(
            channel=premises.workspace.channel,
            clock=self.clock,
            audit=ChainedLog(inputs.artifacts / AUDIT_FILE),
            start_process=functools.partial(start_runner_process, sandboxes.runner, inputs.harness),
            handlers=self.submissions.handlers(),
            reference=functools.partial(runner_reference, inputs, sandboxes),
            on_full=on_full,
        )
        self.live = LiveFile(inputs.harness, spec.agent.console())
        self._inputs = inputs
        self._controller: Sandbox = sandboxes.controller
        self._timeline = timeline

    def start(self) -> AgentProcess:
        """The runner service, then the agent in the controller, its console followed."""
        spec, log = self._inputs.spec, self._inputs.log
        self.service.start()
        process = self._controller.start(spec.agent.command(), stdin=False)
        recovery.record_pid(self._inputs.harness, process.pid)
        log(f"agent '{spec.agent.name}' started: {' '.join(spec.agent.command())}")
        try:
            transcripts = self._follow_console(process)
        except BaseException:
            with contextlib.suppress(Exception):
                process.kill()
            raise
        return AgentProcess(process, transcripts)

    def watch(self, agent: AgentProcess, tick: Callable[[float, float], None] | None) -> Stop:
        """Until the agent exits, the deadline or its adapter's problem; `tick` gets (elapsed,
        budget) for the operator's progress bar."""
        spec, log, clock = self._inputs.spec, self._inputs.log, self.clock
        while True:
            left = clock.time_left()
            if tick:
                tick(clock.elapsed(), clock.budget_s)
            self.show()
            code = agent.process.wait(timeout=min(0.5, left) if left > 0 else 0)
            if code is not None:
                used = clock.elapsed()
                log(f"agent exited with status {code}")
                return Stop(f"the agent exited with status {code}", used, True, None)
            if clock.expired():
                log("deadline reached: stopping the agent and every call in flight")
                return Stop("deadline", clock.budget_s, False, None)
            problem = spec.agent.problem()
            if problem:
                used = clock.elapsed()
                log(
                    f"stopping the agent: {problem}",
                    shown="stopping the agent: an infrastructure problem (the reason follows "
                    "with the result)",
                )
                return Stop(problem, used, False, problem)

    def show(self, used_s: float | None = None) -> None:
        """What the run does now, for `toolkit view` (`toolkit.run.live`); `used_s`: the
        session's length, once it is over."""
        self.live.update(self._timeline.current, self.service.calls_in_flight(), used_s)

    def record(self, used_s: float | None) -> SessionRecord:
        """What the result says of the session: `used_s` as it ended (None: it did not end
        by itself, so the time until now), at most the budget."""
        used = used_s if used_s is not None else self.clock.elapsed()
        return SessionRecord(
            started_at=self.clock.started_at,
            used_s=min(used, self.clock.budget_s),
            runner_s=self.service.runner_seconds,
        )

    def _follow_console(self, agent: SandboxProcess) -> tuple[Transcript, ...]:
        """The agent's stdout and stderr into the files its adapter names (one file when both
        name the same), each line shown to the adapter, and echoed as it says."""
        inputs = self._inputs
        spec = inputs.spec
        redact = [*spec.secrets, *spec.agent.secrets()]
        files: dict[str, Transcript] = {}
        try:
            for stream, pipe, name in zip(
                ("stdout", "stderr"),
                (agent.stdout, agent.stderr),
                spec.agent.console(),
                strict=True,
            ):
                if name not in files:
                    files[name] = Transcript(inputs.artifacts / name, None, redact, log=inputs.log)
                files[name].follow(pipe, self._observer(stream))
        except BaseException:
            for transcript in files.values():
                transcript.close()
            raise
        return tuple(files.values())

    def _observer(self, stream: str) -> Callable[[str], None]:
        agent, echo = self._inputs.spec.agent, self._inputs.echo

        def observe(line: str) -> None:
            shown = agent.observe(stream, line)
            if shown is not None:
                echo(shown)

        return observe
