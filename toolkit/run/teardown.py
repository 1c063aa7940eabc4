"""Tearing a run down (`orchestrate`, step 5): everything killed, the service stopped (every
open call closed and audited), the adapter's last command and the egress log saved, the
reserve released, the audit log's counts written; what went wrong is the teardown's record.
Then (step 6) the adapter's host-side helpers go (`close_agent`).
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

from toolkit.agents import Agent
from toolkit.run.sandboxes import RunSandboxes, runner_reference
from toolkit.run.start import Premises, RunInputs
from toolkit.run.supervise import AgentProcess, Session
from toolkit.sandbox import Sandbox

EGRESS_LOG = "egress.jsonl"


@dataclass(frozen=True)
class TeardownRecord:
    """What the teardown found."""

    errors: tuple[str, ...]
    """What could not be killed, cleaned up or written."""
    took_s: float
    problem: str | None
    """What makes the run `invalid` (an infrastructure failure): the errors, when the
    reference check in a fresh sandbox fails too (or was not asked for); None otherwise."""


def teardown(
    inputs: RunInputs,
    premises: Premises,
    sandboxes: RunSandboxes,
    session: Session,
    agent: AgentProcess | None,
) -> TeardownRecord:
    """Kill everything the run started (fast: a PID namespace dies with its first process);
    `agent`: its process, if it started.

    Never raises: an exception would lose the result. A tree that outlives its kill may be the
    agent's own doing (thousands of mappings take long to die), so it is an infrastructure
    failure (the run invalid) only when the reference check in a fresh sandbox fails too;
    otherwise it is logged, and the run goes on to be graded."""
    log = inputs.log
    started = time.monotonic()
    errors: list[str] = []

    def clean(box: Sandbox) -> None:
        try:
            box.cleanup()
        except Exception as exc:
            errors.append(str(exc))

    # Calls in flight are killed first (so the log says why), then the agent, so that no
    # call can come after the service has stopped: every call the agent made is on record.
    session.service.close()
    if agent is not None:
        try:
            agent.process.kill()
        except Exception as exc:
            errors.append(str(exc))
    # The agent is gone: what is left to write is the harness's (egress log, the last
    # audit entries and counts, the result), out of the reserve it kept for that.
    premises.volume.release_reserve()
    if agent is not None:  # its adapter's last word, in the controller
        _finish_agent(inputs, sandboxes.controller)
    clean(sandboxes.controller)
    session.submissions.close()
    session.service.stop()
    clean(sandboxes.runner)
    took = time.monotonic() - started
    for transcript in agent.transcripts if agent is not None else ():
        transcript.close()
    if session.service.gate is not None:
        try:
            session.service.gate.flush()  # the audit log's counts of what it does not list
        except OSError as exc:
            errors.append(f"the audit log's counts could not be written: {exc}")
    log(f"stopped everything in {took:.2f}s")
    if not errors:
        return TeardownRecord((), took, None)
    said = "teardown failed: " + "; ".join(errors)
    log(said)
    if runner_reference(inputs, sandboxes) is None:
        log("the agent's processes were slow to die or left behind: charged to the agent")
        return TeardownRecord(tuple(errors), took, None)
    return TeardownRecord(tuple(errors), took, said)


def _finish_agent(inputs: RunInputs, controller: Sandbox) -> None:
    """The adapter's last word in the controller (its session export), then the controller's
    egress log into the run folder. Neither may lose the run."""
    log, artifacts = inputs.log, inputs.artifacts
    try:
        inputs.spec.agent.finish(controller, artifacts)
    except Exception:
        log(f"the agent adapter could not finish: {traceback.format_exc()}")
    entries = controller.egress_log
    if entries:
        (artifacts / EGRESS_LOG).write_text(
            "".join(json.dumps(e, sort_keys=True) + "\n" for e in entries), encoding="utf-8"
        )
        refused = sum(1 for e in entries if not e["allowed"])
        log(f"egress: {len(entries) - refused} connections made, {refused} refused")


def close_agent(agent: Agent, log: Callable[[str], None]) -> None:
    """The adapter's host-side helpers (a provider relay) go; never loses the run."""
    try:
        agent.close()
    except Exception:
        log(f"the agent adapter could not close: {traceback.format_exc()}")
