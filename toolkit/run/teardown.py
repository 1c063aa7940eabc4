"""Tearing a run down: everything killed, the service stopped (every open call closed and
audited), the adapter's last command and the egress log saved, the logs checked.
"""

from __future__ import annotations

import json
import time
import traceback

from toolkit.run.supervise import RunSupervision
from toolkit.sandbox import Sandbox

EGRESS_LOG = "egress.jsonl"


class RunTeardown(RunSupervision):
    """The teardown layer of `orchestrate.Run`."""

    def _teardown(self, judge: bool = True) -> str | None:
        """Kill everything the run started (fast: a PID namespace dies with its first process).

        Returns what went wrong, if anything: an exception would lose the result. A tree that
        outlives its kill may be the agent's own doing (thousands of mappings take long to
        die), so with `judge` it is an infrastructure failure (the run invalid) only when the
        reference check in a fresh sandbox fails too; otherwise it is logged, and the run goes
        on to be graded."""
        started = time.monotonic()
        errors: list[str] = []

        def clean(box: Sandbox) -> None:
            try:
                box.cleanup()
            except Exception as exc:
                errors.append(str(exc))

        # Calls in flight are killed first (so the log says why), then the agent, so that no
        # call can come after the service has stopped: every call the agent made is on record.
        if self.service is not None:
            self.service.close()
        if self.agent_process is not None:
            try:
                self.agent_process.kill()
            except Exception as exc:
                errors.append(str(exc))
        # The agent is gone: what is left to write is the harness's (egress log, the last
        # audit entries and counts, the result), out of the reserve it kept for that.
        self._release_reserve()
        self._finish_agent()  # the agent is gone: its adapter's last word, in the controller
        if self.controller is not None and self.controller in self.boxes:
            clean(self.controller)
        if self.submissions is not None:
            self.submissions.close()
        if self.service is not None:
            self.service.stop()
            self.runner_s = self.service.runner_seconds
        for box in self.boxes:
            if box is not self.controller:
                clean(box)
        self.boxes = []
        took = time.monotonic() - started
        for transcript in self.transcripts:
            transcript.close()
        self.transcripts = []
        if self.service is not None and self.service.gate is not None:
            try:
                self.service.gate.flush()  # the audit log's counts of what it does not list
            except OSError as exc:
                errors.append(f"the audit log's counts could not be written: {exc}")
        self.log(f"stopped everything in {took:.2f}s")
        if not errors:
            return None
        self.log("teardown failed: " + "; ".join(errors))
        if judge and self._runner_reference() is None:
            self.log("the agent's processes were slow to die or left behind: charged to the agent")
            return None
        return "teardown failed: " + "; ".join(errors)

    def _finish_agent(self) -> None:
        """The adapter's last word in the controller (its session export), then the controller's
        egress log into the run folder. Neither may lose the run."""
        controller = self.controller
        if controller is None or self.agent_process is None:
            return
        try:
            self.spec.agent.finish(controller, self.artifacts)
        except Exception:
            self.log(f"the agent adapter could not finish: {traceback.format_exc()}")
        entries = controller.egress_log
        if entries:
            (self.artifacts / EGRESS_LOG).write_text(
                "".join(json.dumps(e, sort_keys=True) + "\n" for e in entries), encoding="utf-8"
            )
            refused = sum(1 for e in entries if not e["allowed"])
            self.log(f"egress: {len(entries) - refused} connections made, {refused} refused")

    def _close_agent(self) -> None:
        """The adapter's host-side helpers (a provider relay) go; never loses the run."""
        try:
            self.spec.agent.close()
        except Exception:
            self.log(f"the agent adapter could not close: {traceback.format_exc()}")
