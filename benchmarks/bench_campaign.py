"""What the campaign driver costs: scheduling overhead per run, and the speed-up of N slots.

Runs here sleep instead of training: each is a stand-in run process that sleeps `--sleep`
seconds and writes a real result file, so everything around it is the real thing (driver,
claims, job files, the local engine's run processes; Ray tasks, packing the run as bytes and
collecting it on the driver). For N = 1, 2, 4, 8 slots and 8 runs, on each engine:

  wall        seconds from the driver's start to the last result in the results folder
  speed-up    wall with 1 slot / wall with N slots (target: >= 0.9 x N)
  overhead    per slot, the time from a run process ending to the next one starting on that
              slot (median over the runs; the part of a slot's time lost to scheduling)

The Ray engine runs on a local Ray instance with N fake GPUs, started afresh for each N, with
one warm worker per slot (what a campaign has after its first runs: a Ray worker takes about a
second to start here, once).

    .venv/bin/python benchmarks/bench_campaign.py [--sleep 4] [--engines local,ray] [--slots 1,4]
"""

from __future__ import annotations

import argparse
import functools
import itertools
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from toolkit.campaign.driver import Driver, Progress, View
from toolkit.campaign.engine import Engine
from toolkit.campaign.local_engine import LocalEngine, gpu_slots
from toolkit.campaign.setup import open_campaign
from toolkit.results.model import EffectiveConfig, RunResult, Score, Timings
from toolkit.tracks.model import get_track

REPO = Path(__file__).resolve().parents[1]
RUNS = 8

RESULT_TAIL = """
result = json.load(open("{template}"))
result.update(run_id=job["run_id"], seed=job["seed"], model=job["model"])
result["placement"] = {{"node": job["node"] or "here", "gpu": job["gpu"]}}
folder = os.path.join(job["results_dir"], result["track"])
os.makedirs(folder, exist_ok=True)
path = os.path.join(folder, job["run_id"] + ".json")
with open(path + ".tmp", "w") as f:
    json.dump(result, f)
os.replace(path + ".tmp", path)
report = dict(run_id=job["run_id"], status="valid", result=path, started=started,
              finished=time.time(), node=job["node"], gpu=job["gpu"])
with open(sys.argv[2], "w") as f:
    json.dump(report, f)
"""
"""The end of a stand-in run process (`started` and `job` set before it): a real result file
from the template, and the run's report."""

FAKE_RUN = (
    """
import json, os, sys, time
started = time.time()
job = json.load(open(sys.argv[1]))
time.sleep(float(os.environ.get("BENCH_SLEEP", "{sleep}")))
"""
    + RESULT_TAIL
)


def fake_command(script: str, job_file: Path, report_file: Path) -> list[str]:
    return [sys.executable, "-S", script, str(job_file), str(report_file)]


def _template(path: Path, track: str, budget: float) -> None:
    now = datetime.now(UTC)
    result = RunResult(
        run_id="template",
        track=track,
        model="scripted-bench",
        agent="scripted",
        seed=0,
        started_at=now,
        finished_at=now,
        status="failed",
        status_reason="benchmark stand-in: no run was made",
        score=Score(percent=0.0, passed=0, total=100),
        timings=Timings(budget_s=budget, used_s=0.0, runner_s=0.0),
        config=EffectiveConfig(
            toolkit_version="bench",
            task_brief_sha256="0" * 64,
            exam_sha256="52ad29494ae4af50115d51cd6d485bd4ee34c4286af69f5af1594249c8dea9d3",
            public_set_sha256="0" * 64,
            backend="local",
            protocol_revision=get_track(REPO / "results", track).protocol_revision,
        ),
    )
    path.write_text(result.model_dump_json())


def _campaign(folder: Path, runs: int = RUNS) -> Path:
    (folder / "results").mkdir(parents=True)
    shutil.copy(REPO / "results" / "tracks.json", folder / "results" / "tracks.json")
    file = folder / "campaign.toml"
    file.write_text(
        'track = "demo-cpu-3"\nagent = "scripted"\nbudget_s = 10\n'
        f'seeds = {list(range(runs))}\n\n[[models]]\nname = "scripted-bench"\n'
    )
    return file


def _overheads(progress: Progress) -> list[float]:
    """Per slot: gap between a run process ending and the next one starting there."""
    by_slot: dict[str, list[tuple[float, float]]] = {}
    for f in progress.finished:
        if f.slot and f.started is not None and f.finished is not None:
            by_slot.setdefault(f.slot, []).append((f.started, f.finished))
    gaps = []
    for runs in by_slot.values():
        runs.sort()
        gaps += [b[0] - a[1] for a, b in itertools.pairwise(runs)]
    return gaps


def _measure(engine_name: str, slots: int, work: Path, script: str) -> tuple[float, list[float]]:
    folder = work / f"{engine_name}-{slots}"
    campaign = open_campaign(_campaign(folder))
    command = functools.partial(fake_command, script)
    engine: Engine
    cluster = None
    if engine_name == "local":
        engine = LocalEngine(
            gpu_slots([str(i) for i in range(slots)]), campaign.results_dir, command
        )
    else:
        from ray.cluster_utils import Cluster

        from toolkit.campaign.ray_engine import RayEngine

        cluster = Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": slots,  # Ray starts as many workers at once as it has CPUs
                "num_gpus": slots,
                "object_store_memory": 80 * 2**20,
                "include_dashboard": False,
            },
        )
        engine = RayEngine(
            address=cluster.address, results_dir=campaign.results_dir, exam=b"{}", command=command
        )
        _warm(engine, slots)
    started = time.time()
    try:
        progress = Driver(campaign, engine, View()).run()
    finally:
        if cluster is not None:
            cluster.shutdown()
    # Until the last result was in the results folder (not counting the engine's shutdown).
    wall = max(f.freed or 0.0 for f in progress.finished) - started
    errors = [f.error for f in progress.finished if f.error]
    if errors or progress.done != RUNS:
        raise SystemExit(f"{engine_name} N={slots}: runs went wrong: {errors[:3]}")
    return wall, _overheads(progress)


def _warm(engine: Engine, slots: int) -> None:
    """Start one Ray worker per slot, with the task's imports done, as a long campaign has them
    after its first runs (a worker starts in about a second on this machine)."""
    import ray

    @ray.remote(num_gpus=1, num_cpus=0, max_calls=0)
    def warm() -> None:
        import toolkit.campaign.ray_engine  # noqa: F401

        time.sleep(1.0)  # hold the slot, so that every slot gets a worker of its own

    ray.get([warm.remote() for _ in range(slots)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sleep", type=float, default=4.0, help="seconds each run sleeps")
    parser.add_argument("--engines", default="local,ray")
    parser.add_argument("--slots", default="1,2,4,8", help="slot counts to compare")
    args = parser.parse_args()
    slot_counts = [int(n) for n in args.slots.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench-campaign-") as tmp:
        work = Path(tmp)
        template = work / "result.json"
        _template(template, "demo-cpu-3", 10.0)
        script = work / "fake_run.py"
        script.write_text(FAKE_RUN.format(sleep=args.sleep, template=template))
        print(f"{RUNS} runs of {args.sleep:g}s each; N slots; speed-up = wall(1) / wall(N)")
        for engine_name in args.engines.split(","):
            base = None
            for slots in slot_counts:
                wall, gaps = _measure(engine_name, slots, work, str(script))
                base = base or wall
                speedup = base / wall
                over = f"{1000 * statistics.median(gaps):7.1f} ms" if gaps else "      —   "
                print(
                    f"{engine_name:5s} N={slots}: wall {wall:6.2f}s  speed-up {speedup:4.2f} "
                    f"= {speedup / slots:4.2f} x N (target >= 0.90)  overhead/run {over}"
                    f"  ideal wall {RUNS / slots * args.sleep:5.1f}s",
                    flush=True,
                )


if __name__ == "__main__":
    main()
