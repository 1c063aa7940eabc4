"""Supervising a run: the clock, the agent's console followed as it comes, the live view, until
the agent exits, the deadline comes or its adapter reports an infrastructure problem.
"""

from __future__ import annotations

from collections.abc import Callable

from toolkit.clock import Clock
from toolkit.results.chain import ChainedLog
from toolkit.run import recovery
from toolkit.run.artifacts import AUDIT_FILE, CANDIDATES_DIR
from toolkit.run.live import LiveFile
from toolkit.run.start import RunStart
from toolkit.run.submissions import Submissions
from toolkit.run.transcript import Transcript
from toolkit.runner.service import RunnerService
from toolkit.sandbox import SandboxProcess


class RunSupervision(RunStart):
    """The supervision layer of `orchestrate.Run`."""

    def _supervise(self) -> str:
        """Run the agent until it exits or the deadline; return why it stopped."""
        assert self.workspace is not None and self.history is not None
        assert self.controller is not None
        spec = self.spec
        budget, per_call, reserved = spec.budget
        self.clock = Clock(budget_s=budget, reserved_s=reserved, per_call_limit_s=per_call)
        self.started_at = self.clock.started_at
        submissions = Submissions(
            workspace=self.workspace.root,
            store=self.artifacts / CANDIDATES_DIR,
            history=self.history,
            clock=self.clock,
            grader=self.grader,
            public_set=spec.public_set,
            log=self.log,
            max_candidates=spec.track.max_candidates,
            max_candidate_bytes=spec.track.max_candidate_bytes,
            on_full=self._on_full,
        )
        self.submissions = submissions
        self.service = RunnerService(
            channel=self.workspace.channel,
            clock=self.clock,
            audit=ChainedLog(self.artifacts / AUDIT_FILE),
            start_process=self._start_runner_process,
            handlers=submissions.handlers(),
            reference=self._runner_reference,
            on_full=self._on_full,
        )
        self.service.start()
        self.live = LiveFile(self.harness, spec.agent.console())
        agent = self.controller.start(spec.agent.command(), stdin=False)
        self.agent_process = agent
        recovery.record_pid(self.harness, agent.pid)
        self.log(f"agent '{spec.agent.name}' started: {' '.join(spec.agent.command())}")
        self._follow_console(agent)
        while True:
            left = self.clock.time_left()
            if self.tick:
                self.tick(self.clock.elapsed(), self.clock.budget_s)
            self._show_live()
            code = agent.wait(timeout=min(0.5, left) if left > 0 else 0)
            if code is not None:
                self.agent_exited = True
                self.used_s = self.clock.elapsed()
                self.log(f"agent exited with status {code}")
                return f"the agent exited with status {code}"
            if self.clock.expired():
                self.used_s = self.clock.budget_s
                self.log("deadline reached: stopping the agent and every call in flight")
                return "deadline"
            problem = spec.agent.problem()
            if problem:
                self.used_s = self.clock.elapsed()
                self.agent_problem = problem
                self.log(
                    f"stopping the agent: {problem}",
                    shown="stopping the agent: an infrastructure problem (the reason follows "
                    "with the result)",
                )
                return problem

    def _show_live(self) -> None:
        """What the run does now, for `toolkit view` (`toolkit.run.live`)."""
        if self.live is not None:
            calls = self.service.calls_in_flight() if self.service is not None else []
            self.live.update(self.step, calls, self.used_s)

    def _follow_console(self, agent: SandboxProcess) -> None:
        """The agent's stdout and stderr into the files its adapter names (one file when both
        name the same), each line shown to the adapter, and echoed as it says."""
        spec = self.spec
        redact = [*spec.secrets, *spec.agent.secrets()]
        files: dict[str, Transcript] = {}
        for stream, pipe, name in zip(
            ("stdout", "stderr"), (agent.stdout, agent.stderr), spec.agent.console(), strict=True
        ):
            if name not in files:
                files[name] = Transcript(self.artifacts / name, None, redact, log=self.log)
                self.transcripts.append(files[name])
            files[name].follow(pipe, self._observer(stream))

    def _observer(self, stream: str) -> Callable[[str], None]:
        def observe(line: str) -> None:
            shown = self.spec.agent.observe(stream, line)
            if shown is not None:
                self.echo(shown)

        return observe
