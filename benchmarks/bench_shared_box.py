"""Runs that share a box: two gradings at once, against one alone.

Torch and BLAS size their thread pools to the machine unless told otherwise, so two gradings on
a 2-core box used to run four busy threads on two cores and take about ten times as long each
(11.8 s alone, 183.6 s for two at once, measured before sandboxes sized their pools). This
grades the same starter bundle on the demo exam (phase 1; `--phases generate,bpb` for both)
and prints, each in the same
run:

  alone          one grading, the box to itself
  two, old       two at once, each tree's pools sized to the whole box (ARI_SANDBOX_THREADS =
                 the box's cores: what every sandbox did before)
  two, sized     two at once, each under a quota of half the box (cpus = cores / 2): pools of
                 that size (what `cpus_per_run` and the campaign slots give)
  two, pinned    two at once, each run process pinned to its own half of the cores (what the
                 local campaign engine does with its slots), pools sized to that half

and the slowdown of each against `alone` (the goal: close to 2x for two at once on a box whose
work is CPU-bound, i.e. each slot keeps at least 0.9 of its share).

    .venv/bin/python benchmarks/bench_shared_box.py [--preset tiny] [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from starter_bundle import REPO, fresh_bundle  # benchmarks/starter_bundle.py (this folder)

# One grading, in a process of its own (so that pinning applies to it and all it starts).
GRADE = """
import json, sys, time
from pathlib import Path
from toolkit.grading import grade_bundle
from toolkit.sandbox.cores import pin_from_env
pin_from_env()
cpus = float(sys.argv[3]) if sys.argv[3] != "none" else None
started = time.monotonic()
phases = tuple(sys.argv[4].split(","))
report = grade_bundle(Path(sys.argv[1]), Path(sys.argv[2]), cpus=cpus, hidden=False,
                      phases=phases)
assert report.ok, report.reason
print(json.dumps({"wall": time.monotonic() - started, "p1": report.timings.phase1,
                  "p2": report.timings.phase2}))
"""


def _bundle(work: Path, preset: str) -> Path:
    bundle = work / "bundle"
    fresh_bundle(bundle, preset)
    return bundle


def _grade_many(
    bundle: Path,
    exam: Path,
    n: int,
    *,
    cpus: str,
    env: dict[str, str],
    cores: list[str] | None,
    phases: str,
) -> list[dict[str, float]]:
    procs = []
    for i in range(n):
        child_env = {**os.environ, **env}
        if cores is not None:
            child_env["ARI_CPU_CORES"] = cores[i]
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", GRADE, str(bundle), str(exam), cpus, phases],
                stdout=subprocess.PIPE,
                text=True,
                env=child_env,
            )
        )
    out = []
    for p in procs:
        stdout, _ = p.communicate()
        assert p.returncode == 0, stdout
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument(
        "--phases", default="generate", help="generate (default) or generate,bpb (both)."
    )
    args = parser.parse_args()
    from exam_builder.build import build_exam

    cores = sorted(os.sched_getaffinity(0))
    half = max(1, len(cores) // 2)
    halves = [",".join(map(str, cores[:half])), ",".join(map(str, cores[half : 2 * half]))]
    with tempfile.TemporaryDirectory(prefix="bench-shared-") as tmp:
        work = Path(tmp)
        os.environ.setdefault("ARI_HOME", str(work / "home"))
        bundle = _bundle(work, args.preset)
        build_exam(REPO / "exam_builder/banks/public/demo", work / "exam", english_text=None)
        exam = work / "exam" / "exam.jsonl"
        print(f"{len(cores)} cores; starter '{args.preset}' bundle; demo exam; {args.phases}")
        cases = {
            "alone": (1, "none", {}, None),
            "two, old": (2, "none", {"ARI_SANDBOX_THREADS": str(len(cores))}, None),
            "two, sized": (2, str(len(cores) / 2), {}, None),
            "two, pinned": (2, "none", {}, halves),
        }
        results: dict[str, list[float]] = {}
        for _ in range(args.repeat):
            for name, (n, cpus, env, pins) in cases.items():
                started = time.monotonic()
                runs = _grade_many(
                    bundle, exam, n, cpus=cpus, env=env, cores=pins, phases=args.phases
                )
                wall = time.monotonic() - started
                results.setdefault(name, []).append(max(r["wall"] for r in runs))
                print(
                    f"  {name:12s} wall {wall:7.1f} s; each grading "
                    + ", ".join(
                        f"{r['wall']:.1f} s (phase 1 {r['p1']:.1f}, phase 2 {r['p2']:.1f})"
                        for r in runs
                    )
                )
        alone = min(results["alone"])
        print("\ncase          slowest grading   x alone   (two at once: 2.0 = a fair half)")
        for name, walls in results.items():
            best = min(walls)
            print(f"{name:12s}  {best:10.1f} s     {best / alone:6.2f}")


if __name__ == "__main__":
    main()
