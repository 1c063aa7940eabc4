"""What does the weights ablation add to a grading? Seconds, on the 100-question demo exam.

For two bundles, grades phase 1 with and without the ablation (`grade_bundle(ablation=...)`)
and prints the median totals, their difference, and the ablated pass's own seconds:

- the starter bundle (exported from a freshly initialised model of the chosen preset): its
  config.json becomes random bytes, so the ablated bundle fails at load: the common case of
  a real model, and the cheapest;
- the rule bundle of the tests (tests/grading/bundles/rules, with a dummy weights file): the
  ablated bundle answers every question again, so the whole of phase 1 runs twice.

Also prints the noise throughput of the file step alone: a torch.save file of `--mb` MB of
float32 tensors ablated in place (how the cost grows with a bundle near the 16 MB limit, whose
weights may unpack to far more).

    python benchmarks/bench_ablation.py [--preset tiny|default] [--repeat 3] [--mb 256]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from starter_bundle import REPO, fresh_bundle  # benchmarks/starter_bundle.py (this folder)

RULES = REPO / "tests" / "grading" / "bundles" / "rules"

from exam_builder.build import build_exam  # noqa: E402
from toolkit.grading import grade_bundle  # noqa: E402
from toolkit.grading.ablation import ablate_folder  # noqa: E402


def compare(name: str, bundle: Path, exam: Path, repeat: int) -> None:
    """Median phase-1 grading time without and with the ablation, and the difference."""
    plain, ablated, passes = [], [], []
    for _ in range(repeat):
        off = grade_bundle(bundle, exam, phases=("generate",))
        on = grade_bundle(bundle, exam, phases=("generate",), ablation=True)
        assert off.ok and on.ok and on.ablation is not None, (off.reason, on.reason)
        plain.append(off.timings.total)
        ablated.append(on.timings.total)
        passes.append(on.ablation.seconds)
    base, with_it = statistics.median(plain), statistics.median(ablated)
    assert on.weights_ablation is not None
    print(
        f"{name}: score {on.score.passed}/{on.score.total}, ablated "
        f"{on.weights_ablation.passed}/{on.weights_ablation.total} "
        f"(suspect: {on.model_free_suspect}; {on.ablation.note})"
    )
    print(
        f"  grading without ablation {base:.2f} s, with {with_it:.2f} s: +{with_it - base:.2f} s "
        f"(x{with_it / base:.2f}); the ablated pass itself {statistics.median(passes):.2f} s"
    )


def throughput(work: Path, megabytes: int) -> None:
    folder = work / "big"
    folder.mkdir()
    rows = megabytes * 2**20 // (4 * 1024)
    tensors = {f"w{i}": torch.randn(rows // 8, 1024) for i in range(8)}
    torch.save(tensors, folder / "weights.pt")
    size = (folder / "weights.pt").stat().st_size
    started = time.monotonic()
    counts = ablate_folder(folder, np.random.default_rng())
    seconds = time.monotonic() - started
    print(
        f"file step: {size / 2**20:.0f} MB torch.save file, {counts.tensors} storages: "
        f"{seconds:.2f} s ({size / 2**20 / seconds:.0f} MB/s)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="tiny", choices=["tiny", "default"])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--mb", type=int, default=256, help="Size of the throughput file.")
    args = parser.parse_args()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
        f"{args.repeat} repeats (medians)"
    )
    with tempfile.TemporaryDirectory(prefix="bench-ablation-") as tmp:
        work = Path(tmp)
        build_exam(REPO / "exam_builder/banks/public/demo", work / "exam", english_text=None)
        exam = work / "exam" / "exam.jsonl"
        starter = work / "starter"
        fresh_bundle(starter, args.preset)
        compare(f"starter bundle ({args.preset} preset, untrained)", starter, exam, args.repeat)
        rules = Path(shutil.copytree(RULES, work / "rules"))
        np.save(rules / "weights.npy", np.random.default_rng(0).normal(size=(256, 256)))
        compare("rule bundle (tests/grading/bundles/rules)", rules, exam, args.repeat)
        throughput(work, args.mb)


if __name__ == "__main__":
    main()
