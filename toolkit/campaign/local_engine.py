"""The local engine: one run per slot of this box, each in its own run process.

A slot is a GPU (`--gpus 0,1`, default: every GPU of the box) or, on a box without GPUs, a CPU
slot (`--slots N`). A run on a GPU slot is pinned to it: the run process gets
`CUDA_VISIBLE_DEVICES` and its runner and grading sandboxes see that GPU only (`RunSpec.gpu`).
Each run process is waited for by a thread that wakes the driver the moment it exits, so a
freed slot is refilled without polling. Each slot also gets its share of the box's cores (split
evenly, `cores.slot_cores`): its run process pins itself there, so a run's runner and gradings
never compete with another slot's for a core, and their thread pools are sized to that share.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from toolkit.campaign.child import PARENT_ENV, parent_token
from toolkit.campaign.claims import campaign_state
from toolkit.campaign.engine import Finished, Running, now
from toolkit.campaign.job import Job, Report, host_name
from toolkit.results.model import load_run
from toolkit.run import recovery
from toolkit.run.spec import new_run_id
from toolkit.sandbox.cores import CORES_ENV, slot_cores

STOP_GRACE_S = 60.0  # a stopped run tears down and writes its invalid result in this time

Command = Callable[[Path, Path], list[str]]


def child_command(job_file: Path, report_file: Path) -> list[str]:
    return [sys.executable, "-m", "toolkit.campaign.child", str(job_file), str(report_file)]


@dataclass(frozen=True)
class Slot:
    name: str
    gpu: str | None


def gpu_slots(ids: list[str]) -> list[Slot]:
    return [Slot(name=f"gpu{i}", gpu=i) for i in ids]


def cpu_slots(count: int) -> list[Slot]:
    return [Slot(name=f"cpu{i}", gpu=None) for i in range(count)]


@dataclass
class _Child:
    job: Job
    slot: Slot
    process: subprocess.Popen[bytes]
    report: Path
    started: float


def outcome_of(job: Job, report_file: Path, results_dir: Path, code: int | None) -> Finished:
    """What became of a run process: its report, else its result file, else recovery's."""
    report: Report | None = None
    with contextlib.suppress(OSError, ValueError):
        report = Report.model_validate_json(report_file.read_text(encoding="utf-8"))
    result = results_dir / job.track.id / f"{job.run_id}.json"
    if not result.is_file():
        recovery.recover_runs()  # a harness that died leaves a marker: record it as invalid
    status = None
    if result.is_file():
        with contextlib.suppress(ValueError):
            status = load_run(result).status
    error = None
    if status is None:
        error = (report.error if report else None) or (
            f"the run process exited with status {code} and left no result"
        )
    return Finished(
        job=job,
        status=status,
        result=result if status is not None else None,
        error=error,
        started=report.started if report else None,
        finished=report.finished if report else None,
    )


class LocalEngine:
    """Slots of this box; `command` makes the run process's argv (a test or benchmark may
    give its own)."""

    name = "local"

    def __init__(
        self, slots: list[Slot], results_dir: Path, command: Command = child_command
    ) -> None:
        if not slots:
            raise ValueError("the local engine needs at least one slot")
        self.results_dir = results_dir
        self.command = command
        self._all = slots
        self._free = list(slots)
        self._children: dict[str, _Child] = {}
        self._exits: queue.Queue[tuple[str, int, float]] = queue.Queue()
        state = campaign_state(results_dir)
        self._jobs = state / "jobs"
        self._logs = state / "logs"
        self._jobs.mkdir(exist_ok=True)
        self._logs.mkdir(exist_ok=True)
        self.node = host_name()

    def room(self) -> int:
        return len(self._free)

    def slots(self) -> list[str]:
        return [s.name for s in self._all]

    def start(self, job: Job, claim_fd: int | None = None) -> None:
        slot = self._free.pop(0)
        run_id = job.run_id or new_run_id(job.model, job.seed)
        job = job.model_copy(
            update={
                "run_id": run_id,
                "gpu": slot.gpu,
                "node": self.node,
                "results_dir": str(self.results_dir),
            }
        )
        job_file = self._jobs / f"{run_id}.json"
        job_file.write_text(job.model_dump_json(indent=2), encoding="utf-8")
        report = self._jobs / f"{run_id}.report.json"
        env = dict(os.environ)
        env[PARENT_ENV] = parent_token()  # known before the child runs: it cannot miss our end
        cores = slot_cores(self._all.index(slot), len(self._all))
        if cores is not None:  # its own share of the box's cores, for it and its sandboxes
            env[CORES_ENV] = ",".join(map(str, cores))
        if slot.gpu is not None:  # the harness's own view; its sandboxes pin by UUID
            env["CUDA_VISIBLE_DEVICES"] = slot.gpu
            env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # ids are nvidia-smi's (bus order)
        with (self._logs / f"{run_id}.log").open("ab") as log:
            process = subprocess.Popen(
                self.command(job_file, report),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                pass_fds=() if claim_fd is None else (claim_fd,),
                start_new_session=True,  # Ctrl-C reaches the driver, which stops runs in order
            )
        self._children[run_id] = _Child(job, slot, process, report, now())
        threading.Thread(target=self._await, args=(run_id, process), daemon=True).start()

    def _await(self, run_id: str, process: subprocess.Popen[bytes]) -> None:
        code = process.wait()
        self._exits.put((run_id, code, now()))

    def wait(self, timeout: float) -> list[Finished]:
        exits = []
        try:
            exits.append(self._exits.get(timeout=timeout))
            while True:
                exits.append(self._exits.get_nowait())
        except queue.Empty:
            pass
        done = []
        for run_id, code, freed in exits:
            child = self._children.pop(run_id)
            self._free.append(child.slot)
            self._free.sort(key=self._all.index)
            finished = outcome_of(child.job, child.report, self.results_dir, code)
            child.report.unlink(missing_ok=True)
            (self._jobs / f"{run_id}.json").unlink(missing_ok=True)
            finished.slot = f"{self.node}/{child.slot.name}"
            finished.freed = freed
            done.append(finished)
        return done

    def running(self) -> list[Running]:
        return [
            Running(job=c.job, slot=c.slot.name, started=c.started) for c in self._children.values()
        ]

    def close(self) -> None:
        children = list(self._children.values())
        for child in children:
            with contextlib.suppress(ProcessLookupError):
                child.process.send_signal(signal.SIGTERM)
        for child in children:
            try:
                child.process.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                child.process.kill()
                child.process.wait()
