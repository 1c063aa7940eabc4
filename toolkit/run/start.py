"""A run's first steps (`orchestrate`, steps 1-3): its inputs (`read_inputs`: the id, the
folders, the log, the grading in force, the training data's record), then its premises
(`take_premises`: the harness's reserve on the results volume, the workspace on its capped
folder, checked for leaks, with the runner channel and the agent's tools, and the run's
submission history). Each step returns what it made, and a step that fails gives back what
it took before it raises.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from toolkit.agents import AgentContext
from toolkit.grading.grade import fit_to_host
from toolkit.results.model import TrainData
from toolkit.run import recovery, roles
from toolkit.run.agent_log import AgentLog
from toolkit.run.artifacts import AGENT_LOG
from toolkit.run.history import HISTORY_FILE, SubmissionHistory
from toolkit.run.spec import RunSpec, new_run_id
from toolkit.run.storage import Volume
from toolkit.run.submissions import Grader
from toolkit.run.workspace import Workspace, WorkspaceError, assemble, find_leaks
from toolkit.runner.channel import make_channel
from toolkit.runner.client import install_client
from toolkit.sandbox import capped
from toolkit.text.data import load_prepared

AGENT_HOME = "agent"  # in the channel folder: seen by the controller only


@dataclass(frozen=True)
class RunInputs:
    """What a run starts from (step 1), fixed for its whole life."""

    spec: RunSpec
    run_id: str
    work: Path
    """`$ARI_HOME/runs/<run_id>/`: the workspace and the harness folder."""
    harness: Path
    """The harness's own folder (RUNNING marker, launcher pids, live view): no sandbox sees it."""
    artifacts: Path
    """The run folder, `results/<track>/<run_id>/`."""
    log: AgentLog
    echo: Callable[[str], None]
    """The operator's console (the agent's lines its adapter chooses to show)."""
    grader: Grader
    """The grading in force: the track's, with a memory cap above this host's memory lowered
    to it (`grading_notes` says so). It hides nothing yet: the run's sandboxes make the one
    that hides what they hide (`sandboxes.RunSandboxes.grader`)."""
    grading_notes: tuple[str, ...]
    train_data: TrainData | None
    """The training data's record (hashes), when it was prepared with one."""
    started_at: datetime
    """When the harness started: the result's start until the agent's clock starts."""


def read_inputs(spec: RunSpec, echo: Callable[[str], None]) -> RunInputs:
    """Step 1: the run's id and folders, its log, the grading in force, the training data's
    record (`WorkspaceError` when the track pins other data)."""
    run_id = spec.run_id or new_run_id(spec.model, spec.seed)
    work = recovery.runs_root() / run_id
    artifacts = spec.results_dir / spec.track.id / run_id
    started_at = datetime.now(UTC)
    born = time.monotonic()  # agent.log times count from the harness's start
    log = AgentLog(artifacts / AGENT_LOG, lambda: time.monotonic() - born, echo)
    # The grading parameters in force: the track's, with a memory cap above this host's
    # memory lowered to it (as `toolkit grade` does); the effective config records these.
    grading, notes = fit_to_host(spec.track.grading)
    grader = Grader(
        params=grading,
        size_limit_bytes=spec.track.size_limit_bytes,
        backend=spec.backend,
        # A pinned run grades on its own GPU: "cuda:N" pins the grading sandbox to GPU N.
        device=f"cuda:{spec.gpu}"
        if spec.gpu is not None and spec.device == "cuda"
        else spec.device,
        cpus=spec.cpus,
    )
    meta = spec.data_dir / "meta.json"
    data = load_prepared(spec.data_dir).record() if meta.is_file() else None
    mismatch = spec.track.train_data_mismatch(
        data.train_sha256 if data else None, data.val_sha256 if data else None
    )
    if mismatch:
        raise WorkspaceError(f"{spec.data_dir}: not the track's training data ({mismatch})")
    return RunInputs(
        spec=spec,
        run_id=run_id,
        work=work,
        harness=work / "harness",
        artifacts=artifacts,
        log=log,
        echo=echo,
        grader=grader,
        grading_notes=tuple(notes),
        train_data=data,
        started_at=started_at,
    )


@dataclass(frozen=True)
class Premises:
    """What the run stands on (steps 2-3), held until the run is over (`release`)."""

    volume: Volume
    """The results volume, with the harness's reserve on it (released when the session ends,
    so that the last log lines and the result are always written)."""
    workspace: Workspace
    workspace_cap: capped.CappedFolder | None
    """The workspace's own filesystem, capped at the track's size (None: the host cannot)."""
    bin_dir: Path
    """The controller's tools: the `runner` client, and nothing else on its PATH."""
    history: SubmissionHistory

    def release(self) -> None:
        """The workspace's cap goes (its files with it), and the reserve, if still held."""
        if self.workspace_cap is not None:
            self.workspace_cap.release()
        self.volume.release_reserve()


def take_premises(inputs: RunInputs) -> Premises:
    """Steps 2-3: the reserve on the results volume, the workspace (capped, assembled, checked
    for leaks, with the runner channel and the agent's tools), the agent prepared in it, the
    run's history (in the run folder, which the caller made). Raises `WorkspaceError` (or
    `StorageError`) for what an operator can fix."""
    spec, log = inputs.spec, inputs.log
    inputs.harness.mkdir(parents=True)
    # Before anything else takes room: the harness's reserve on the results volume.
    volume = Volume(inputs.artifacts)
    volume.take_reserve()
    with contextlib.ExitStack() as undo:  # a step that fails gives back what it took
        undo.callback(volume.release_reserve)
        room, allowed = volume.room_at_start, spec.track.max_candidate_bytes
        log(
            f"results volume: {volume.reserve_bytes:,} bytes kept for the harness, "
            f"{room:,} free for the run (its candidates may take {allowed:,})"
            + ("; a run that fills it fails" if room < allowed else "")
        )
        cap = _cap_workspace(inputs)
        if cap is not None:
            undo.callback(cap.release)
        workspace = assemble(
            inputs.work / "workspace",
            data_dir=spec.data_dir,
            public_set=spec.public_set,
            starter=spec.starter,
        )
        root = workspace.root
        leaks = find_leaks(root, exam=spec.exam, secrets=[*spec.secrets, *spec.agent.secrets()])
        if leaks:
            raise RuntimeError(
                f"the workspace would contain the exam or a secret: {', '.join(leaks)} in "
                f"{root}; check --train-data and the environment"
            )
        make_channel(workspace.channel)
        bin_dir = roles.controller_bin(workspace.channel / "bin")
        install_client(bin_dir, workspace.channel)
        home = workspace.channel / AGENT_HOME
        home.mkdir()
        budget, per_call, reserved = spec.budget
        spec.agent.prepare(
            root,
            AgentContext(
                model=spec.model,
                effort=spec.effort,
                seed=spec.seed,
                budget_s=budget,
                reserved_s=reserved,
                per_call_limit_s=per_call,
                bin_dir=bin_dir,
                home_dir=home,
                artifacts=inputs.artifacts,
                backend=spec.backend,
                log=log,
            ),
        )
        history = SubmissionHistory(inputs.artifacts / HISTORY_FILE)
        undo.pop_all()  # all taken: the caller holds it now
    return Premises(volume, workspace, cap, bin_dir, history)


def _cap_workspace(inputs: RunInputs) -> capped.CappedFolder | None:
    """A hard cap on the workspace where the host can (else the root disk, per file)."""
    size = inputs.spec.track.workspace_disk_bytes
    cap = capped.cap_folder(inputs.work / "workspace", size) if size else None
    if size and cap is not None and cap.size_bytes < size:
        inputs.log(
            f"workspace capped at {cap.size_bytes:,} bytes, below the track's {size:,}: "
            "half of the host's free disk not promised to other capped folders"
        )
    return cap


def volume_full_note(volume: Volume, log: AgentLog) -> Callable[[str], None]:
    """What the runner service and the submissions call on a write the full results volume
    refused: noted (logged the first time), judged when the session ends."""

    def on_full(what: str) -> None:
        first = volume.refused == 0
        volume.note_full(what)
        if first:
            log(f"the results volume is full: {what} could not be written")

    return on_full
