"""The run's sandboxes (`orchestrate`, step 4): the runner (the agent's compute) and the
controller (its scaffold), both hiding `roles.run_hidden`, checked against the track's
isolation floor before anything starts in them; and, on the same settings, the runner's
reference check in a fresh sandbox and the start of a runner process.
"""

from __future__ import annotations

import contextlib
import dataclasses
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from toolkit.host import floor
from toolkit.paths import state_relative
from toolkit.run import recovery, reference, roles
from toolkit.run.inputs import PUBLIC_BANKS
from toolkit.run.start import Premises, RunInputs
from toolkit.run.submissions import Grader
from toolkit.run.workspace import WorkspaceError
from toolkit.runner.service import CallRefused
from toolkit.sandbox import Sandbox, SandboxProcess, SandboxRootAltered


@dataclass(frozen=True)
class RunSandboxes:
    """The runner and the controller of one run, and what they hide."""

    runner: Sandbox
    controller: Sandbox
    isolation: tuple[str, ...]
    """What the run had: each sandbox's own protections, and the harness's on top."""
    runner_hidden: tuple[Path, ...]
    runner_readonly: tuple[Path, ...]
    grader: Grader
    """The inputs' grader, hiding what the sandboxes hide: public scoring, whose feedback
    reaches the agent, and the final grading see no more than the runner does."""

    def cleanup(self) -> list[str]:
        """Both sandboxes gone (the controller first); what went wrong, never raised."""
        errors: list[str] = []
        for box in (self.controller, self.runner):
            try:
                box.cleanup()
            except Exception as exc:
                errors.append(str(exc))
        return errors


def make_sandboxes(inputs: RunInputs, premises: Premises) -> RunSandboxes:
    """Step 4, before the agent starts: the runner sandbox, then the controller; a run that
    cannot have the track's isolation floor does not start (`WorkspaceError`)."""
    spec, log = inputs.spec, inputs.log
    workspace = premises.workspace
    try:
        hidden = roles.run_hidden(
            exam=spec.exam,
            results_dir=spec.results_dir,
            extra=[inputs.artifacts, inputs.harness, PUBLIC_BANKS, *spec.bank_dirs],
        )
    except ValueError as exc:
        raise WorkspaceError(str(exc)) from exc
    readonly = (workspace.data,)
    runner_hidden = (*hidden, workspace.channel)
    runner = roles.make_runner(
        spec.backend,
        workspace.root,
        hide=runner_hidden,
        readonly=readonly,
        gpu=spec.gpu,
        cpus=spec.cpus,
    )
    with contextlib.ExitStack() as undo:  # a step that fails gives back what it made
        undo.callback(_quietly, runner)
        controller = roles.make_controller(
            spec.backend,
            workspace.root,
            bin_dir=premises.bin_dir,
            hide=hidden,
            network=spec.agent.needs_network(),
            env=spec.agent.env(),
            readonly=readonly,
            egress=spec.agent.egress(),
        )
        undo.callback(_quietly, controller)
        isolation = _isolation(inputs, runner, controller)
        _check_floor(inputs, {"controller": controller.isolation, "runner": runner.isolation})
        undo.pop_all()
    # Published with the run: no path of the operator's machine, only where within its folders.
    results = inputs.artifacts.relative_to(inputs.spec.results_dir).as_posix()
    log(f"workspace {state_relative(workspace.root)}; results {results} in the results folder")
    log(f"controller isolation: {', '.join(controller.isolation)}")
    log(f"controller NOT isolated: {', '.join(controller.not_isolated)}")
    log(f"runner isolation: {', '.join(runner.isolation)}")
    log(f"runner NOT isolated: {', '.join(runner.not_isolated)}")
    for note in inputs.grading_notes:  # recorded as in force: off the track's rules
        log(f"grading: {note}; the effective config records the lowered value")
    return RunSandboxes(
        runner=runner,
        controller=controller,
        isolation=isolation,
        runner_hidden=runner_hidden,
        runner_readonly=readonly,
        grader=dataclasses.replace(inputs.grader, hide=tuple(hidden)),
    )


def _quietly(box: Sandbox) -> None:
    with contextlib.suppress(Exception):
        box.cleanup()


def _isolation(inputs: RunInputs, runner: Sandbox, controller: Sandbox) -> tuple[str, ...]:
    """The sandboxes' own protections, plus what the harness adds on top for the controller."""
    spec = inputs.spec
    extra = {"controller:path-restricted", *spec.agent.isolation()}
    if "egress-allowlist" in controller.isolation:
        extra.add("controller:provider-only")
    if spec.backend == "docker":  # the controller image has no Python and gets no GPU
        extra |= {"controller:no-python-image", "controller:no-gpu"}
    elif "hidden-paths" in controller.isolation:
        extra.add("controller:python-hidden")
        extra |= {"controller:gpu-hidden"} if roles.gpu_device_paths() else set()
    return tuple(
        sorted(
            {f"controller:{i}" for i in controller.isolation}
            | {f"runner:{i}" for i in runner.isolation}
            | extra
        )
    )


def _check_floor(inputs: RunInputs, isolation: dict[str, list[str]]) -> None:
    """The track's isolation floor, against what the sandboxes really have: a run that cannot
    have it does not start (the grader's sandbox is made the same way as the runner's, on the
    same backend)."""
    spec = inputs.spec
    gpu = spec.gpu is not None or spec.device.startswith("cuda")
    lacking = floor.missing(spec.track.isolation_floor, isolation, gpu=gpu)
    if lacking:
        other = "docker" if spec.backend == "local" else "local"
        raise WorkspaceError(
            f"track '{spec.track.id}' needs isolation this run cannot have on the "
            f"{spec.backend} backend: {', '.join(lacking)}; try --backend {other}, and see "
            f"`toolkit doctor --track {spec.track.id}`"
        )


def start_runner_process(runner: Sandbox, harness: Path, argv: list[str]) -> SandboxProcess:
    """A `runner` call's process in the runner sandbox (its pid recorded for recovery)."""
    try:
        process = runner.start(argv, stdin=False)
    except SandboxRootAltered as exc:  # e.g. `.runner` moved or replaced by the agent
        raise CallRefused(
            f"the runner cannot start: {exc}; put it back as it was (the harness keeps it)"
        ) from None
    recovery.record_pid(harness, process.pid)
    return process


def runner_reference(inputs: RunInputs, sandboxes: RunSandboxes) -> str | None:
    """The runner's reference check: a trivial command, and one started and killed, in a
    fresh runner sandbox (same backend and settings, a new empty root of the harness's);
    None if the sandboxes work (see `reference`)."""
    spec = inputs.spec

    def make(root: Path) -> Sandbox:
        return roles.make_runner(
            spec.backend,
            root,
            hide=sandboxes.runner_hidden,
            readonly=sandboxes.runner_readonly,
            gpu=spec.gpu,
            cpus=spec.cpus,
        )

    root = inputs.work / f"reference-{secrets.token_hex(4)}"
    started = time.monotonic()
    problem = reference.runner_reference(make, root)
    took = time.monotonic() - started
    inputs.log(
        f"reference check in a fresh runner sandbox ({took:.1f}s): "
        + ("the sandboxes work" if problem is None else f"FAILED: {problem}")
    )
    return problem
