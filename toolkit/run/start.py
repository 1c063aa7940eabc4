"""Setting a run up: inputs checked, the workspace, the run folder, the runner sandbox and
service, the isolation floor checked, then the agent started in the controller sandbox.
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

from toolkit.agents import AgentContext
from toolkit.host import floor
from toolkit.run import recovery, reference, roles
from toolkit.run.history import HISTORY_FILE, SubmissionHistory
from toolkit.run.inputs import PUBLIC_BANKS
from toolkit.run.outcome import RunState
from toolkit.run.storage import Volume
from toolkit.run.workspace import WorkspaceError, assemble, find_leaks
from toolkit.runner.channel import make_channel
from toolkit.runner.client import install_client
from toolkit.runner.service import CallRefused
from toolkit.sandbox import Sandbox, SandboxProcess, SandboxRootAltered, capped

AGENT_HOME = "agent"  # in the channel folder: seen by the controller only


class RunStart(RunState):
    """The set-up layer of `orchestrate.Run`."""

    def _setup(self) -> None:
        spec = self.spec
        data = self.train_data
        mismatch = spec.track.train_data_mismatch(
            data.train_sha256 if data else None, data.val_sha256 if data else None
        )
        if mismatch:
            raise WorkspaceError(f"{spec.data_dir}: not the track's training data ({mismatch})")
        self.harness.mkdir(parents=True)
        # Before anything else takes room: the harness's reserve on the results volume.
        self.volume = Volume(self.artifacts)
        self.volume.take_reserve()
        room, allowed = self.volume.room_at_start, spec.track.max_candidate_bytes
        self.log(
            f"results volume: {self.volume.reserve_bytes:,} bytes kept for the harness, "
            f"{room:,} free for the run (its candidates may take {allowed:,})"
            + ("; a run that fills it fails" if room < allowed else "")
        )
        cap = spec.track.workspace_disk_bytes  # a hard cap where the host can (else root-disk)
        self.workspace_cap = capped.cap_folder(self.work / "workspace", cap) if cap else None
        if cap and self.workspace_cap is not None and self.workspace_cap.size_bytes < cap:
            self.log(
                f"workspace capped at {self.workspace_cap.size_bytes:,} bytes, below the track's "
                f"{cap:,}: half of the host's free disk not promised to other capped folders"
            )
        self.workspace = assemble(
            self.work / "workspace",
            data_dir=spec.data_dir,
            public_set=spec.public_set,
            starter=spec.starter,
        )
        ws = self.workspace.root
        leaks = find_leaks(ws, exam=spec.exam, secrets=[*spec.secrets, *spec.agent.secrets()])
        if leaks:
            raise RuntimeError(
                f"the workspace would contain the exam or a secret: {', '.join(leaks)} in {ws}; "
                "check --train-data and the environment"
            )
        make_channel(self.workspace.channel)
        bin_dir = roles.controller_bin(self.workspace.channel / "bin")
        install_client(bin_dir, self.workspace.channel)
        budget, per_call, reserved = spec.budget
        spec.agent.prepare(
            ws,
            AgentContext(
                model=spec.model,
                effort=spec.effort,
                seed=spec.seed,
                budget_s=budget,
                reserved_s=reserved,
                per_call_limit_s=per_call,
                bin_dir=bin_dir,
                home_dir=self._agent_home(),
                artifacts=self.artifacts,
                backend=spec.backend,
                log=self.log,
            ),
        )
        self.history = SubmissionHistory(self.artifacts / HISTORY_FILE)
        try:
            hidden = roles.run_hidden(
                exam=spec.exam,
                results_dir=spec.results_dir,
                extra=[self.artifacts, self.harness, PUBLIC_BANKS, *spec.bank_dirs],
            )
        except ValueError as exc:
            raise WorkspaceError(str(exc)) from exc
        self.grader.hide = tuple(hidden)  # public scoring and the final grading hide the same
        readonly = [self.workspace.data]
        self.runner_hidden = [*hidden, self.workspace.channel]
        self.runner_readonly = readonly
        runner_box = roles.make_runner(
            spec.backend,
            ws,
            hide=self.runner_hidden,
            readonly=readonly,
            gpu=spec.gpu,
            cpus=spec.cpus,
        )
        self.boxes.append(runner_box)
        controller = roles.make_controller(
            spec.backend,
            ws,
            bin_dir=bin_dir,
            hide=hidden,
            network=spec.agent.needs_network(),
            env=spec.agent.env(),
            readonly=readonly,
            egress=spec.agent.egress(),
        )
        self.boxes.append(controller)
        # The sandbox's own protections, plus what the harness adds on top for the controller.
        extra = {"controller:path-restricted", *spec.agent.isolation()}
        if "egress-allowlist" in controller.isolation:
            extra.add("controller:provider-only")
        if spec.backend == "docker":  # the controller image has no Python and gets no GPU
            extra |= {"controller:no-python-image", "controller:no-gpu"}
        elif "hidden-paths" in controller.isolation:
            extra.add("controller:python-hidden")
            extra |= {"controller:gpu-hidden"} if roles.gpu_device_paths() else set()
        self.isolation = sorted(
            {f"controller:{i}" for i in controller.isolation}
            | {f"runner:{i}" for i in runner_box.isolation}
            | extra
        )
        self._check_floor({"controller": controller.isolation, "runner": runner_box.isolation})
        self.log(f"workspace {ws}; results {self.artifacts}")
        self.log(f"controller isolation: {', '.join(controller.isolation)}")
        self.log(f"controller NOT isolated: {', '.join(controller.not_isolated)}")
        self.log(f"runner isolation: {', '.join(runner_box.isolation)}")
        self.log(f"runner NOT isolated: {', '.join(runner_box.not_isolated)}")
        for note in self.grading_notes:  # recorded as in force: off the track's rules
            self.log(f"grading: {note}; the effective config records the lowered value")
        self.controller = controller
        self.runner_box = runner_box
        # Before any process starts: from here on, a crash of this harness is recoverable.
        recovery.write_marker(
            self.harness,
            recovery.Marker(
                pid=os.getpid(),
                pid_start=recovery.process_start(os.getpid()),
                results_dir=str(spec.results_dir.resolve()),
                artifacts=str(self.artifacts.resolve()),
                skeleton=self.skeleton("the harness died before the run finished"),
            ),
        )

    def _check_floor(self, isolation: dict[str, list[str]]) -> None:
        """The track's isolation floor, against what the sandboxes really have: a run that
        cannot have it does not start (the grader's sandbox is made the same way as the
        runner's, on the same backend)."""
        spec = self.spec
        gpu = spec.gpu is not None or spec.device.startswith("cuda")
        lacking = floor.missing(spec.track.isolation_floor, isolation, gpu=gpu)
        if lacking:
            other = "docker" if spec.backend == "local" else "local"
            raise WorkspaceError(
                f"track '{spec.track.id}' needs isolation this run cannot have on the "
                f"{spec.backend} backend: {', '.join(lacking)}; try --backend {other}, and see "
                f"`toolkit doctor --track {spec.track.id}`"
            )

    def _agent_home(self) -> Path:
        assert self.workspace is not None
        home = self.workspace.channel / AGENT_HOME
        home.mkdir()
        return home

    def _start_runner_process(self, argv: list[str]) -> SandboxProcess:
        assert self.runner_box is not None
        try:
            process = self.runner_box.start(argv, stdin=False)
        except SandboxRootAltered as exc:  # e.g. `.runner` moved or replaced by the agent
            raise CallRefused(
                f"the runner cannot start: {exc}; put it back as it was (the harness keeps it)"
            ) from None
        recovery.record_pid(self.harness, process.pid)
        return process

    def _runner_reference(self) -> str | None:
        """The runner's reference check: a trivial command, and one started and killed, in a
        fresh runner sandbox (same backend and settings, a new empty root of the harness's);
        None if the sandboxes work (see `reference`)."""
        spec = self.spec

        def make(root: Path) -> Sandbox:
            return roles.make_runner(
                spec.backend,
                root,
                hide=self.runner_hidden,
                readonly=self.runner_readonly,
                gpu=spec.gpu,
                cpus=spec.cpus,
            )

        root = self.work / f"reference-{secrets.token_hex(4)}"
        started = time.monotonic()
        problem = reference.runner_reference(make, root)
        took = time.monotonic() - started
        self.log(
            f"reference check in a fresh runner sandbox ({took:.1f}s): "
            + ("the sandboxes work" if problem is None else f"FAILED: {problem}")
        )
        return problem
