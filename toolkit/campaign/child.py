"""The run process: one campaign run, `python -m toolkit.campaign.child JOB REPORT`.

Both engines run each run in a fresh process of this module, which calls the toolkit's run API
(`execute_run` with a `RunSpec`), rather than in the driver (local) or the Ray worker itself:

- crash safety keys on the harness's pid: a `RUNNING` marker whose pid is dead is recorded as
  `invalid` by the next `toolkit` command. Two runs in one process would share a pid (and
  `recover_runs` treats markers of its own pid as dead), and a Ray worker is reused across
  tasks; one process per run keeps that model exact;
- SIGTERM ends a run cleanly (everything stopped, the result written as `invalid`) only in a
  process's main thread;
- a run that brings its process down (out of memory, a native crash) takes no other run and
  not the campaign with it, and every run starts with a fresh CUDA context on its GPU.

If the process that started it dies (the campaign driver killed, a Ray worker lost with its
node), the run notices within a second, stops everything it started and records itself as
`invalid` (interrupted: the driver died), so no agent is left running unsupervised. The starter
names itself in the environment (`PARENT_ENV`, its pid and kernel start time) *before* this
process exists, so a driver that dies while this module is still importing is noticed too: the
watcher compares with that, not with whatever `getppid()` says once the imports are done.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

from exam_builder.exam_file import ExamFileError
from toolkit import state
from toolkit.campaign.config import CampaignError
from toolkit.campaign.job import (
    Job,
    Report,
    build_agent,
    check_training_data,
    host_name,
    secret_values,
)
from toolkit.paths import state_dir
from toolkit.results.model import RunResult, write_json_atomic
from toolkit.run.inputs import InputError, check_public_set, prepare_data, public_set, resolve_exam
from toolkit.run.interrupt import Interrupted
from toolkit.run.orchestrate import execute_run
from toolkit.run.recovery import process_start
from toolkit.run.roles import detect_device
from toolkit.run.spec import RunSpec, new_run_id
from toolkit.run.workspace import WorkspaceError
from toolkit.sandbox import SandboxError
from toolkit.sandbox.cores import pin_from_env
from toolkit.text.data import DataError

ORPHAN_CHECK_S = 0.5
PARENT_ENV = "ARI_CAMPAIGN_PARENT"
"""`PID:START`: the process that started this run (its kernel start time guards pid reuse)."""
# What a run process reports as "no result" (one line) instead of dying with a traceback.
EXPECTED_ERRORS = (
    CampaignError,
    InputError,
    ExamFileError,
    DataError,
    WorkspaceError,
    SandboxError,
    RuntimeError,
    ValueError,
    OSError,
)


_stop_reason = "SIGTERM: the campaign was stopped"


def _terminate(signum: int, _frame: object) -> None:
    raise Interrupted(_stop_reason, 128 + signum)


def parent_token(pid: int | None = None) -> str:
    """What a starter puts in `PARENT_ENV` for the run process it is about to start."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}:{process_start(pid) or ''}"


def _expected_parent() -> tuple[int, str | None]:
    """The starter named in the environment; without one (a hand-started child), the parent
    as it is now."""
    raw = os.environ.get(PARENT_ENV, "")
    pid, _, start = raw.partition(":")
    if pid.isdigit():
        return int(pid), start or None
    parent = os.getppid()
    return parent, process_start(parent)


def _parent_alive(pid: int, start: str | None) -> bool:
    return os.getppid() == pid and (start is None or process_start(pid) == start)


def _watch_parent(pid: int, start: str | None) -> None:
    """End this run like a SIGTERM once the process that started it is gone (at once if it
    was gone before this process got here)."""
    global _stop_reason
    while _parent_alive(pid, start):
        time.sleep(ORPHAN_CHECK_S)
    _stop_reason = "its campaign driver died"
    os.kill(os.getpid(), signal.SIGTERM)


def _device(job: Job) -> str:
    """Grade on the GPU when the run has one that CUDA can use, else on the CPU."""
    return "cpu" if job.gpu is None else detect_device()


def run_job(job: Job) -> RunResult:
    """Make the job's run here and return its published result."""
    track = job.track
    exam = resolve_exam(track, None if job.exam is None else Path(job.exam))
    public = public_set()
    check_public_set(track, public)
    scratch: Path | None = None
    if job.data_dir is not None:
        data_dir = Path(job.data_dir)
    else:
        scratch = Path(tempfile.mkdtemp(prefix="prepared-data-", dir=state_dir()))
        data_dir = prepare_data(None if job.train_data is None else Path(job.train_data), scratch)
    check_training_data(track, data_dir, job.train_data)  # on every node, for every run
    try:
        spec = RunSpec(
            track=track,
            model=job.model,
            seed=job.seed,
            agent=build_agent(job),
            exam=exam,
            public_set=public,
            data_dir=data_dir,
            results_dir=Path(job.results_dir),
            backend=job.backend,
            device=_device(job),
            effort=job.effort,
            budget_s=job.budget_s,
            per_call_limit_s=job.per_call_limit_s,
            reserved_s=job.reserved_s,
            run_id=job.run_id,
            secrets=secret_values(job),
            gpu=job.gpu,
            cpus=job.cpus,
            node=job.node or host_name(),
        )
        return execute_and_discard(spec)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def execute_and_discard(spec: RunSpec) -> RunResult:
    """`execute_run`, then the run's folder in $ARI_HOME (workspace, harness notes) goes once
    the run is finished, whether it ended or was interrupted, as `toolkit run` does: its result
    and artifacts are in the results folder. A run whose harness died keeps it for recovery
    (`state.discard_run` removes finished runs only)."""
    try:
        return execute_run(spec)
    finally:
        if spec.run_id is not None:
            state.discard_run(spec.run_id)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m toolkit.campaign.child JOB.json REPORT.json", file=sys.stderr)
        return 2
    job_file, report_file = Path(argv[0]), Path(argv[1])
    pinned = pin_from_env()  # the slot's cores, before any thread pool exists
    if pinned is not None:
        print(f"pinned to cores {','.join(map(str, pinned))}", flush=True)
    started = time.time()
    report = Report(started=started, finished=started)
    code = 0
    signal.signal(signal.SIGTERM, _terminate)
    try:  # from here on, a stop (the driver gone, SIGTERM) still leaves a report
        threading.Thread(target=_watch_parent, args=_expected_parent(), daemon=True).start()
        job = Job.model_validate_json(job_file.read_text(encoding="utf-8"))
        if job.run_id is None:
            job.run_id = new_run_id(job.model, job.seed)
        report.run_id, report.node, report.gpu = job.run_id, job.node, job.gpu
        result = run_job(job)
        report.status = result.status
        report.result = str(Path(job.results_dir) / result.track / f"{result.run_id}.json")
    except EXPECTED_ERRORS as exc:
        traceback.print_exc()  # into the run's log; the report keeps one line
        report.error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        code = 1
    except (SystemExit, KeyboardInterrupt) as exc:
        # The run recorded itself as invalid (interrupted) on its way out, if it had begun.
        why = exc.reason if isinstance(exc, Interrupted) else type(exc).__name__
        report.error = f"the run process was stopped ({why})"
        code = 143
    report.finished = time.time()
    write_json_atomic(report_file, report.model_dump_json() + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
