"""What does starting the grading's workers early save? The starter bundle on the demo exam.

Each phase runs in a fresh worker. Started when its phase begins (the old way), a worker's
sandbox, interpreter, numpy/torch imports (and, on a GPU, CUDA's start-up) come before its
first request: phase 1's after packing, phase 2's after phase 1. Started as the grading begins
(`grade.py`'s `_Spare`), both start-ups overlap the packing and phase 1, and once each phase
may begin only the bundle's own import and load() are left (phase 2's bundle is even unpacked
while phase 1 runs). Both ways graded alternately in the same run; prints phase 2's time (its
load included) and the whole grading's, median and best of `--repeat`, and what is saved.

    python benchmarks/bench_phase2_start.py [--preset tiny|default] [--device cpu|cuda]
                                            [--backend local|docker] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]

from starter_bundle import fresh_bundle  # noqa: E402  (this script's folder)

from exam_builder.build import build_exam  # noqa: E402
from toolkit.grading import grade_bundle  # noqa: E402
from toolkit.grading.report import GradeReport  # noqa: E402
from toolkit.tracks.model import GradingParams  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="tiny", choices=["tiny", "default"])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--backend", default="local", choices=["local", "docker"])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    params = GradingParams()
    with tempfile.TemporaryDirectory(prefix="bench-phase2-") as tmp:
        work = Path(tmp)
        bundle = work / "bundle"
        model = fresh_bundle(bundle, args.preset)
        build_exam(REPO / "exam_builder/banks/public/demo", work / "exam", english_text=None)
        exam = work / "exam" / "exam.jsonl"
        print(
            f"machine: {platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
            f"device {args.device}, backend {args.backend}; bundle: starter '{args.preset}' "
            f"preset, {model.num_params() / 1e6:.2f}M parameters; demo exam"
        )
        runs: dict[bool, list[GradeReport]] = {True: [], False: []}
        for _ in range(args.repeat):
            for prestart in (False, True):  # alternate, so both see the same machine load
                report = grade_bundle(
                    bundle,
                    exam,
                    params=params,
                    backend=args.backend,
                    device=args.device,
                    _prestart=prestart,
                )
                assert report.ok, report.reason
                runs[prestart].append(report)
        after, during = runs[False], runs[True]
        assert all(
            r.model_dump(exclude={"timings"}) == after[0].model_dump(exclude={"timings"})
            for r in after + during
        ), "the two ways graded differently"

        def line(name: str, reports: list[GradeReport]) -> tuple[float, float]:
            phase2 = [r.timings.phase2 for r in reports]
            total = [r.timings.total for r in reports]
            print(
                f"{name}: phase 2 (its load included) median {statistics.median(phase2):.2f}s "
                f"best {min(phase2):.2f}s | whole grading median {statistics.median(total):.2f}s"
                f" best {min(total):.2f}s"
            )
            return statistics.median(phase2), statistics.median(total)

        old2, old_total = line("phase 2's worker started after phase 1 ", after)
        new2, new_total = line("phase 2's worker started during phase 1", during)
        print(
            f"saved: {old2 - new2:.2f}s of phase 2 ({old2 / new2:.2f}x), "
            f"{old_total - new_total:.2f}s of the whole grading (median of {args.repeat} each; "
            "same reports: True)"
        )


if __name__ == "__main__":
    main()
