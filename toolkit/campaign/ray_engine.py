"""The Ray engine: one Ray task per run, on whatever node of an existing cluster has a slot.

Each task asks for one GPU (`num_gpus=1`; Ray's scheduler, not ours, decides where it goes),
or, for CPU tracks, one unit of a custom resource the operator gave the nodes
(`ray start --resources '{"ari_slot": 2}'`, then `--ray-resource ari_slot`). On its node the
task pins the run to the GPU Ray assigned (`get_accelerator_ids()`), makes the run in a run
process (`child.py`) with its own exam copy and a private results folder, and returns the
result file and the artifact folder as bytes: the driver alone writes them into the results
folder (`collect.py`), so the nodes share no filesystem with it.

Cores: the task claims a share of its host's cores first (`node_share.py`: the host's units
of the resource are its slots, split as the local engine splits a box) and its run process pins
itself there, so two runs on a host never size their gradings' thread pools to the same cores.
Before the first run, a probe on each node reports a host with more slots than cores.

Failures: a worker or node that dies takes its task with it and Ray runs the task again
elsewhere (`max_retries`; the orphaned run process stops itself and everything it started);
a run that ends `invalid` is a result like any other and the campaign decides on a rerun.

Progress: tasks tell a small actor on the driver's node when they start (node, GPU) and end;
the driver reads it for the live view. A lost actor costs the view, never a run.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from toolkit.campaign.child import PARENT_ENV, parent_token
from toolkit.campaign.collect import CollectError, pack_run, unpack_run
from toolkit.campaign.config import CampaignError
from toolkit.campaign.engine import Finished, Running
from toolkit.campaign.job import Job
from toolkit.campaign.local_engine import Command, child_command, outcome_of
from toolkit.campaign.node_share import (
    HostFacts,
    Share,
    host_facts,
    host_slots,
    launch_environ,
    release,
    run_env,
    take_share,
)
from toolkit.paths import state_dir
from toolkit.results.model import ResultsError
from toolkit.run.spec import new_run_id

TASK_RETRIES = 3  # Ray's own retries of a task whose worker or node died
LOG_TAIL = 2000


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise CampaignError(
            "the ray engine needs Ray: pip install -e '.[ray]' (or use --engine local)"
        ) from None
    return ray


class Board:
    """Which task runs where (a Ray actor on the driver's node)."""

    def __init__(self) -> None:
        self.running: dict[str, tuple[str, str | None, float]] = {}

    def started(self, token: str, node: str, gpu: str | None, at: float) -> None:
        self.running[token] = (node, gpu, at)

    def finished(self, token: str) -> None:
        self.running.pop(token, None)

    def snapshot(self) -> dict[str, tuple[str, str | None, float]]:
        return dict(self.running)


def _exam_copy(exam: bytes) -> Path:
    """The shipped exam, in the state folder (hidden from every sandbox of a run)."""
    digest = hashlib.sha256(exam).hexdigest()
    path = state_dir() / "exams" / f"campaign-{digest[:16]}" / "exam.jsonl"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(exam)
        os.replace(tmp, path)
    return path


def run_on_node(
    job_json: str,
    exam: bytes,
    board: Any,
    token: str,
    command: Command | None = None,
    unit: str = "GPU",
) -> dict[str, Any]:
    """The task: make one run on this node, return its report and the packed run."""
    import ray

    context = ray.get_runtime_context()
    gpus = context.get_accelerator_ids().get("GPU", [])
    node = context.get_node_id()
    gpu = str(gpus[0]) if gpus else None
    work = Path(tempfile.mkdtemp(prefix="campaign-task-", dir=state_dir()))
    job = Job.model_validate_json(job_json)
    job = job.model_copy(
        update={
            "run_id": new_run_id(job.model, job.seed),  # each try its own: no clash on a node
            "gpu": gpu,
            "node": node,
            "results_dir": str(work / "results"),
            "exam": str(_exam_copy(exam)),
        }
    )
    with contextlib.suppress(Exception):
        board.started.remote(token, node, gpu, time.time())
    share = _host_share(node, unit)  # released below, whatever happens: the worker is reused
    try:
        job_file, report, log = work / "job.json", work / "report.json", work / "run.log"
        job_file.write_text(job.model_dump_json(), encoding="utf-8")
        env = run_env(os.environ, share, launch_environ())  # its cores, not Ray's threads
        env[PARENT_ENV] = parent_token()  # this worker: the run stops if it is lost
        if gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = gpu
        with log.open("wb") as out:
            out.write(f"ray task on node {node[:8]}: {share.describe()}\n".encode())
            out.flush()
            code = subprocess.run(
                (command or child_command)(job_file, report),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                pass_fds=() if share.fd is None else (share.fd,),  # the run keeps its cores
                check=False,
            ).returncode
        outcome = outcome_of(job, report, work / "results", code)
        blob = None
        if outcome.status is not None:
            assert job.run_id is not None
            blob = pack_run(work / "results", job.track.id, job.run_id)
        return {
            "status": outcome.status,
            "error": outcome.error,
            "started": outcome.started,
            "finished": outcome.finished,
            "slot": _slot(node, gpu),
            "blob": blob,
            "log_tail": log.read_bytes()[-LOG_TAIL:].decode("utf-8", "replace"),
        }
    finally:
        release(share)
        with contextlib.suppress(Exception):
            board.finished.remote(token)
        shutil.rmtree(work, ignore_errors=True)


def _host_share(node: str, unit: str) -> Share:
    """This task's share of its host's cores (`node_share`)."""
    import ray

    try:
        slots = host_slots(ray.nodes(), socket.gethostname(), unit, node)  # type: ignore[no-untyped-call]
    except Exception:  # Ray's state API unreachable: one slot, and the run goes on
        slots = 1
    return take_share(slots, unit)


def probe_host(unit: str) -> HostFacts:
    """The pre-flight probe, run on one node: what its workers see of their host."""
    import ray

    nodes = ray.nodes()  # type: ignore[no-untyped-call]
    return host_facts(ray.get_runtime_context().get_node_id(), nodes, unit)


def _last_line(text: str) -> str:
    """The line of a Ray error that says what went wrong (its last non-empty one)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _slot(node: str, gpu: str | None) -> str:
    return f"{node[:8]}/gpu{gpu}" if gpu is not None else node[:8]


class RayEngine:
    """Runs as Ray tasks on an existing cluster (or a local one Ray starts)."""

    name = "ray"

    def __init__(
        self,
        *,
        address: str | None,
        results_dir: Path,
        exam: bytes,
        resource: str | None = None,
        command: Command | None = None,
    ) -> None:
        ray = _ray()
        self.ray = ray
        self.results_dir = results_dir
        self._owns = not ray.is_initialized()
        if self._owns:
            try:
                ray.init(address=address, log_to_driver=False, logging_level="warning")
            except (ConnectionError, RuntimeError, ValueError) as exc:
                where = address or "RAY_ADDRESS or a local cluster"
                raise CampaignError(
                    f"cannot connect to the Ray cluster at {where}: {exc}"
                ) from None
        total = ray.cluster_resources()
        unit = resource or "GPU"
        if total.get(unit, 0) < 1:
            hint = (
                f"start its nodes with --resources '{{\"{resource}\": N}}'"
                if resource
                else "for a CPU track give the nodes a custom resource and pass --ray-resource"
            )
            raise CampaignError(f"the Ray cluster has no '{unit}' resource: {hint}")
        self.options: dict[str, Any] = {
            "num_cpus": 0,
            "max_retries": TASK_RETRIES,
            "retry_exceptions": False,
            **({"resources": {resource: 1}} if resource else {"num_gpus": 1}),
        }
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        here = ray.get_runtime_context().get_node_id()
        self.board = (
            ray.remote(num_cpus=0)(Board)
            .options(scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=True))
            .remote()
        )
        # Ray gives a GPU task a fresh worker each time (max_calls=1) so that CUDA memory is
        # freed; this task never touches CUDA (its run process does), so its worker is reused.
        self.task = ray.remote(max_calls=0)(run_on_node)
        self.unit = unit
        self.exam = ray.put(exam)
        self.command = command
        self._inflight: dict[Any, tuple[Job, str, float]] = {}
        self._view: dict[str, tuple[str, str | None, float]] = {}
        self._view_at = 0.0

    def host_problems(self, timeout: float = 60.0) -> list[str]:
        """A probe on every alive node that has the resource: each host whose slots outnumber
        the cores its workers may use (its runs cannot each get a core of their own)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        probe = self.ray.remote(num_cpus=0)(probe_host)
        refs = [
            probe.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
            ).remote(self.unit)
            for node in self.ray.nodes()
            if node.get("Alive") and (node.get("Resources") or {}).get(self.unit, 0) > 0
        ]
        ready, _ = self.ray.wait(refs, num_returns=len(refs), timeout=timeout)
        problems = []
        for ref in ready:
            with contextlib.suppress(Exception):
                facts: HostFacts = self.ray.get(ref)
                if (problem := facts.problem()) and problem not in problems:
                    problems.append(problem)
        for ref in set(refs) - set(ready):
            self.ray.cancel(ref, force=True)
        return problems

    def room(self) -> int:
        # Ray queues what cannot start yet and starts it the moment a slot frees.
        return 1_000_000

    def start(self, job: Job, claim_fd: int | None = None) -> None:
        token = f"{job.key.slug()}#{job.attempt}"
        ref = self.task.options(**self.options).remote(
            job.model_dump_json(), self.exam, self.board, token, self.command, self.unit
        )
        self._inflight[ref] = (job, token, time.time())

    def wait(self, timeout: float) -> list[Finished]:
        refs = list(self._inflight)
        if not refs:
            time.sleep(timeout)
            return []
        ready, _ = self.ray.wait(refs, num_returns=1, timeout=timeout)
        if ready:
            ready, _ = self.ray.wait(refs, num_returns=len(refs), timeout=0)
        return [self._collect(ref) for ref in ready]

    def _collect(self, ref: Any) -> Finished:
        job, _, _ = self._inflight.pop(ref)
        freed = time.time()
        try:
            out = self.ray.get(ref)
        except self.ray.exceptions.RayError as exc:
            reason = _last_line(str(exc)) or type(exc).__name__
            return Finished(job=job, status=None, result=None, error=f"Ray: {reason}", freed=freed)
        finished = Finished(
            job=job,
            status=None,
            result=None,
            error=out["error"],
            slot=out["slot"],
            started=out["started"],
            finished=out["finished"],
            freed=freed,
        )
        if out["blob"] is not None:
            try:
                path, result, _ = unpack_run(out["blob"], self.results_dir)
            except (CollectError, ResultsError, OSError) as exc:
                finished.error = f"the run's result could not be collected: {exc}"
                return finished
            finished.status, finished.result = result.status, path
        elif not finished.error:
            finished.error = "the run left no result; log: " + out["log_tail"][-300:]
        return finished

    def running(self) -> list[Running]:
        if time.time() - self._view_at > 1.0:
            with contextlib.suppress(Exception):
                self._view = self.ray.get(self.board.snapshot.remote(), timeout=2)
            self._view_at = time.time()
        by_token = {token: job for job, token, _ in self._inflight.values()}
        return [
            Running(job=by_token[token], slot=_slot(node, gpu), started=at)
            for token, (node, gpu, at) in self._view.items()
            if token in by_token
        ]

    def slots(self) -> list[str]:
        return []

    def close(self) -> None:
        for ref in list(self._inflight):
            with contextlib.suppress(Exception):
                self.ray.cancel(ref, force=True)  # the run process sees its worker go, and stops
        self._inflight.clear()
        if self._owns:
            self.ray.shutdown()
