"""Calibration: what does the untouched starter score after N seconds of training?

For each budget, runs `starter/train.py` exactly as an agent would (a subprocess, from a
workspace-like folder holding the prepared training text), then grades the bundle it exported
on the public validation set (exact match) and on an exam (exact match and bits per byte). The
table it prints, and the plot it writes, is the starter's floor: what an agent gets for doing
nothing but running the starter for that long.

    python benchmarks/bench_calibration.py                       # CPU: 10, 20, 40 s, demo exam
    python benchmarks/bench_calibration.py --device cuda --corpus /data/v1 \\
        --exam /secret/exam.jsonl --budgets 60,300,900,1800,3300 --out /tmp/calibration

`--corpus`: a prepared folder (`toolkit data prepare`), any text source, or nothing for the
default corpus. Writes `calibration.json` and a plot (`calibration.png` when matplotlib is
installed, else `calibration.svg`) into `--out`. The exam is only ever summarised (scores),
never printed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel, Field

REPO = Path(__file__).resolve().parents[1]
STARTER = REPO / "toolkit" / "starter"

from toolkit.grading.grade import grade_bundle  # noqa: E402
from toolkit.run.inputs import DEMO_BANK, built_exam, public_set  # noqa: E402
from toolkit.text.data import prepare_train_data  # noqa: E402
from toolkit.tracks.model import GradingParams  # noqa: E402


class Point(BaseModel):
    """One budget of the calibration curve."""

    budget_s: float = Field(description="Wall-clock budget given to train.py (all in).")
    steps: int = Field(description="Optimizer steps taken.")
    bytes_seen: int = Field(description="Training bytes (= tokens) seen.")
    train_s: float = Field(description="Seconds spent training.")
    best_step: int = Field(description="Step whose weights were exported.")
    val_bpb: float | None = Field(description="The exported bundle's bits per byte on val.bin.")
    public_percent: float | None = Field(description="Exact match on the public validation set.")
    exam_percent: float | None = Field(description="Exact match on the exam.")
    exam_bpb: float | None = Field(description="Bits per byte on the exam's answer spans.")


def train(
    workspace: Path, budget_s: float, device: str, preset: str | None, max_steps: int | None = None
) -> dict[str, object]:
    out = workspace / f"bundle-{budget_s:g}"
    command = [sys.executable, str(STARTER / "train.py"), "--data", "data", "--out", out.name]
    command += ["--budget-s", str(budget_s), "--device", device]
    if preset:
        command += ["--preset", preset]
    if max_steps:
        command += ["--max-steps", str(max_steps)]
    subprocess.run(command, cwd=workspace, check=True, stdout=subprocess.DEVNULL)
    summary: dict[str, object] = json.loads((out / "train_summary.json").read_text())
    summary["bundle"] = str(out)
    return summary


def measure(
    workspace: Path, budget_s: float, args: argparse.Namespace, exam: Path, public: Path
) -> Point:
    summary = train(workspace, budget_s, args.device, args.preset, args.max_steps)
    bundle = Path(str(summary["bundle"]))
    params = GradingParams()
    grade_device = "cuda" if args.device == "cuda" else "cpu"
    on_public = grade_bundle(
        bundle, public, params=params, device=grade_device, phases=("generate",)
    )
    on_exam = grade_bundle(bundle, exam, params=params, device=grade_device)
    exported = summary.get("exported_val_bpb")
    return Point(
        budget_s=budget_s,
        steps=int(str(summary["steps"])),
        bytes_seen=int(str(summary["train_bytes_seen"])),
        train_s=float(str(summary["train_s"])),
        best_step=int(str(summary.get("best_step", summary["steps"]))),
        val_bpb=float(str(exported)) if exported is not None else None,
        public_percent=on_public.score.percent if on_public.ok else None,
        exam_percent=on_exam.score.percent if on_exam.ok else None,
        exam_bpb=on_exam.bits_per_byte,
    )


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def table(points: list[Point]) -> str:
    lines = [
        f"{'budget s':>9} {'tokens seen':>14} {'best step':>10} {'val bpb':>8} "
        f"{'valid. %':>9} {'exam %':>7} {'exam bpb':>9}"
    ]
    for p in points:
        lines.append(
            f"{p.budget_s:>9g} {p.bytes_seen:>14,} {p.best_step:>10} {_fmt(p.val_bpb, '.4f'):>8} "
            f"{_fmt(p.public_percent, '.0f'):>9} {_fmt(p.exam_percent, '.0f'):>7} "
            f"{_fmt(p.exam_bpb, '.3f'):>9}"
        )
    return "\n".join(lines)


def plot_png(points: list[Point], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    budgets = [p.budget_s for p in points]
    fig, left = plt.subplots(figsize=(7, 4))
    left.plot(budgets, [p.val_bpb for p in points], "o-", color="tab:blue", label="val bpb")
    left.plot(budgets, [p.exam_bpb for p in points], "s--", color="tab:cyan", label="exam bpb")
    left.set_xscale("log")
    left.set_xlabel("training budget (s)")
    left.set_ylabel("bits per byte")
    right = left.twinx()
    right.plot(budgets, [p.public_percent for p in points], "o-", color="tab:red", label="valid. %")
    right.plot(budgets, [p.exam_percent for p in points], "s--", color="tab:orange", label="exam %")
    right.set_ylabel("exact match (%)")
    right.set_ylim(0, 100)
    fig.legend(loc="upper center", ncol=4, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_svg(points: list[Point], path: Path) -> None:
    """The same plot without matplotlib: bpb on the left axis, exact match % on the right."""
    width, height, pad = 640, 360, 60
    budgets = [p.budget_s for p in points]
    lo, hi = min(budgets), max(budgets)
    bpbs = [v for p in points for v in (p.val_bpb, p.exam_bpb) if v is not None]
    top_bpb = max([*bpbs, 1.0]) * 1.1

    def x(budget: float) -> float:
        import math

        span = math.log(hi / lo) if hi > lo else 1.0
        return pad + (width - 2 * pad) * (math.log(budget / lo) / span if hi > lo else 0.5)

    def y(value: float, top: float) -> float:
        return height - pad + (2 * pad - height) * value / top

    def series(values: list[float | None], top: float, colour: str, dash: str) -> str:
        xy = [(x(b), y(v, top)) for b, v in zip(budgets, values, strict=True) if v is not None]
        if not xy:
            return ""
        pts = " ".join(f"{a:.1f},{b:.1f}" for a, b in xy)
        dots = "".join(f'<circle cx="{a:.1f}" cy="{b:.1f}" r="3" fill="{colour}"/>' for a, b in xy)
        return (
            f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="2" '
            f'stroke-dasharray="{dash}"/>{dots}'
        )

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" '
        'stroke="black"/>',
        f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{height - pad}" stroke="black"/>',
        f'<line x1="{width - pad}" y1="{pad}" x2="{width - pad}" y2="{height - pad}" '
        'stroke="black"/>',
        f'<text x="{width / 2}" y="{height - 15}" text-anchor="middle">training budget (s, '
        "log scale)</text>",
        f'<text x="15" y="{pad - 15}">bits per byte (0-{top_bpb:.1f})</text>',
        f'<text x="{width - 15}" y="{pad - 15}" text-anchor="end">exact match % (0-100)</text>',
    ]
    for b in budgets:
        parts.append(
            f'<text x="{x(b):.1f}" y="{height - pad + 15}" text-anchor="middle">{b:g}</text>'
        )
    parts.append(series([p.val_bpb for p in points], top_bpb, "#1f77b4", "none"))
    parts.append(series([p.exam_bpb for p in points], top_bpb, "#17becf", "6,3"))
    parts.append(series([p.public_percent for p in points], 100.0, "#d62728", "none"))
    parts.append(series([p.exam_percent for p in points], 100.0, "#ff7f0e", "6,3"))
    legend = [("val bpb", "#1f77b4"), ("exam bpb", "#17becf"), ("valid. %", "#d62728")]
    legend.append(("exam %", "#ff7f0e"))
    for i, (label, colour) in enumerate(legend):
        parts.append(
            f'<text x="{pad + 10 + 110 * i}" y="{pad - 30}" fill="{colour}">{label}</text>'
        )
    parts.append("</svg>")
    path.write_text("\n".join(parts) + "\n")


def plot(points: list[Point], out: Path) -> Path:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        path = out / "calibration.svg"
        plot_svg(points, path)
        return path
    path = out / "calibration.png"
    plot_png(points, path)
    return path


def main(argv: list[str] | None = None) -> list[Point]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=None, help="prepared folder or text")
    parser.add_argument("--budgets", default=None, help="comma-separated seconds")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--preset", default=None, choices=["micro", "tiny", "default"])
    parser.add_argument("--exam", type=Path, default=None, help="exam.jsonl (default: demo exam)")
    parser.add_argument(
        "--max-steps", type=int, default=None, help="also stop each training after N steps (smoke)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(tempfile.gettempdir()) / "ari-calibration",
        help="output folder (default: ari-calibration in the temporary folder)",
    )
    args = parser.parse_args(argv)
    default_budgets = "60,300,900,1800,3300" if args.device == "cuda" else "10,20,40"
    budgets = [float(b) for b in (args.budgets or default_budgets).split(",")]
    exam = args.exam or built_exam(DEMO_BANK, "demo")
    public = public_set()
    print(
        f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} CPUs, python "
        f"{platform.python_version()}, device {args.device}; exam {exam.name}, budgets {budgets}"
    )
    args.out.mkdir(parents=True, exist_ok=True)
    points: list[Point] = []
    with tempfile.TemporaryDirectory(prefix="bench-calibration-") as tmp:
        workspace = Path(tmp)
        prepared = prepare_train_data(args.corpus, workspace / "data")
        print(f"corpus: {prepared.source}, {prepared.train_bytes:,} training bytes")
        for budget in budgets:
            started = time.monotonic()
            points.append(measure(workspace, budget, args, exam, public))
            print(f"budget {budget:g} s done in {time.monotonic() - started:.0f} s", flush=True)
    print()
    print(table(points))
    (args.out / "calibration.json").write_text(
        json.dumps([p.model_dump() for p in points], indent=2) + "\n"
    )
    print(f"\nwrote {args.out / 'calibration.json'} and {plot(points, args.out)}")
    return points


if __name__ == "__main__":
    main()
