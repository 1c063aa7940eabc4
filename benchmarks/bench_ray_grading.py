"""A grading started from a Ray task against the same grading started from a local slot.

Each run here is a stand-in run process that does one real grading and nothing else: it pins
itself as a campaign's run process does (`cores.pin_from_env`, before any thread pool), grades
a freshly initialised starter bundle on the 100-question demo exam (`grade_bundle`, local
sandbox, both phases), writes a real result file and reports the grading's seconds. Everything
around it is the campaign's own: the driver, the local engine's run processes and slots, the
Ray engine's tasks (its core shares, its environment) on a Ray head started here with
`--slots` units of a custom resource, as an operator's `ray start --resources`.

It prints, from one process: one grading alone; `--runs` gradings on `--slots` local slots; the
same on the Ray engine; and the ratio of the Ray gradings' median to the local ones' (target:
at most 1.2), with each engine's speed-up over one run at a time.

    .venv/bin/python benchmarks/bench_ray_grading.py [--slots 2] [--runs 4] [--preset tiny]
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_campaign import RESULT_TAIL, _campaign, _template
from starter_bundle import fresh_bundle

from exam_builder.build import build_exam
from toolkit.campaign.driver import Driver, View
from toolkit.campaign.engine import Engine
from toolkit.campaign.local_engine import LocalEngine, cpu_slots
from toolkit.campaign.setup import open_campaign

REPO = Path(__file__).resolve().parents[1]
RESOURCE = "bench_grading_slot"

GRADING_RUN = (
    """
import json, os, sys, time
from pathlib import Path
from toolkit.sandbox.cores import pin_from_env
pinned = pin_from_env()
started = time.time()
job = json.load(open(sys.argv[1]))
from toolkit.grading import grade_bundle
t = time.monotonic()
report = grade_bundle(Path("{bundle}"), Path("{exam}"), device="cpu", hidden=False)
seconds = time.monotonic() - t
assert report.ok, report.reason
with open(os.path.join("{out}", job["run_id"] + ".json"), "w") as f:
    json.dump(dict(seconds=seconds, pinned=pinned, threads=os.environ.get("OMP_NUM_THREADS")), f)
"""
    + RESULT_TAIL
)


def grading_command(script: str, job_file: Path, report_file: Path) -> list[str]:
    return [sys.executable, script, str(job_file), str(report_file)]


def _gradings(out: Path) -> list[dict[str, object]]:
    found = [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))]
    for p in out.glob("*.json"):
        p.unlink()
    return found


def _run(engine_name: str, slots: int, runs: int, work: Path, script: str) -> float:
    """Wall seconds of `runs` runs on `slots` slots of `engine_name` (the gradings' own seconds
    land in the out folder)."""
    folder = work / f"{engine_name}-{slots}-{runs}-{time.monotonic_ns()}"
    campaign = open_campaign(_campaign(folder, runs))
    command = functools.partial(grading_command, script)
    engine: Engine
    cluster = None
    if engine_name == "local":
        engine = LocalEngine(cpu_slots(slots), campaign.results_dir, command)
    else:
        from ray.cluster_utils import Cluster

        from toolkit.campaign.ray_engine import RayEngine

        cluster = Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": slots,
                "resources": {RESOURCE: slots},
                "object_store_memory": 80 * 2**20,
                "include_dashboard": False,
            },
        )
        engine = RayEngine(
            address=cluster.address,
            results_dir=campaign.results_dir,
            exam=b"{}",
            resource=RESOURCE,
            command=command,
        )
        for problem in engine.host_problems():  # type: ignore[attr-defined]
            print(f"  note: {problem}")
    started = time.time()
    try:
        progress = Driver(campaign, engine, View()).run()  # closes the engine
    finally:
        if cluster is not None:
            cluster.shutdown()
    errors = [f.error for f in progress.finished if f.error]
    if errors or progress.done != runs:
        raise SystemExit(f"{engine_name}: runs went wrong: {errors[:3]}")
    return max(f.freed or 0.0 for f in progress.finished) - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--slots", type=int, default=2, help="runs at once, on each engine")
    parser.add_argument("--runs", type=int, default=4, help="runs on each engine")
    parser.add_argument("--preset", default="tiny", help="the starter preset of the bundle")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-ray-grading-") as tmp:
        work = Path(tmp)
        print("building the demo exam and a starter bundle...", flush=True)
        build_exam(REPO / "exam_builder/banks/public/demo", work / "exam", english_text=None)
        fresh_bundle(work / "bundle", args.preset)
        template = work / "result.json"
        _template(template, "demo-cpu-3", 10.0)
        out = work / "gradings"
        out.mkdir()
        script = work / "grading_run.py"
        script.write_text(
            GRADING_RUN.format(
                bundle=work / "bundle",
                exam=work / "exam" / "exam.jsonl",
                out=out,
                template=template,
            )
        )
        alone_wall = _run("local", 1, 1, work, str(script))
        alone = float(_gradings(out)[0]["seconds"])  # type: ignore[arg-type]
        print(f"one grading alone: {alone:.1f}s (run wall {alone_wall:.1f}s)")
        medians = {}
        for name in ("local", "ray"):
            wall = _run(name, args.slots, args.runs, work, str(script))
            found = _gradings(out)
            seconds = sorted(float(g["seconds"]) for g in found)  # type: ignore[arg-type]
            medians[name] = statistics.median(seconds)
            pins = sorted({str(g["pinned"]) for g in found})
            speedup = args.runs * alone_wall / wall
            print(
                f"{name:5s} {args.runs} runs on {args.slots} slots: gradings "
                f"{', '.join(f'{s:.1f}' for s in seconds)}s (median {medians[name]:.1f}s, "
                f"{medians[name] / alone:.2f} x alone); wall {wall:.1f}s, speed-up "
                f"{speedup:.2f} over one at a time; pinned to {' '.join(pins)}",
                flush=True,
            )
        ratio = medians["ray"] / medians["local"]
        verdict = "ok" if ratio <= 1.2 else "SLOWER"
        print(f"ray / local grading median: {ratio:.2f} (target <= 1.20): {verdict}")


if __name__ == "__main__":
    main()
