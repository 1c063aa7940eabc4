"""How fast does the starter train, and which preset learns most in a budget?

For each preset asked (`--presets default,narrow,...`; a preset may carry train.py settings
joined by "+", e.g. `default+export_bits=6+n_layer=6`, passed as `--set KEY=VALUE`), runs
`starter/train.py` exactly as an agent would (a subprocess, from a workspace-like folder on
prepared training text) for `--budget-s` seconds, reads its `train_summary.json`, packs the
bundle it exported as the grader does, and prints one row per preset: shape and size, steps,
bytes (= tokens) per second, model FLOP utilisation and the validation bits per byte reached.
The official default preset is the row with the best bits per byte at the track's budget (an
hour on one H100): run this there with `--budget-s 3600`; shorter budgets favour smaller models.

MFU, as `train.py` counts it: FLOPs per trained byte = 6 x (parameters in matrix multiplies,
the output head included, embeddings excluded) + 6 x layers x context x width (causal
attention), times bytes per second, over the card's dense bf16 datasheet peak (H100/H200 SXM:
989 TFLOP/s). "steady" counts from the end of the first step (which compiles) to the end of
training; "overall" divides by the whole training time, compile and validations included. On
CPU there is no peak, and no MFU.

    python benchmarks/bench_train.py [--presets tiny] [--device cpu|cuda] [--budget-s 120]
                                     [--corpus PATH] [--json OUT] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
STARTER = REPO / "toolkit" / "starter"

from toolkit.grading.pack import pack_bundle  # noqa: E402
from toolkit.text.data import prepare_train_data  # noqa: E402


def safe(preset: str) -> str:
    """A file name for a preset with settings (`default+n_head=4` -> `default_n_head-4`)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", preset.replace("=", "-"))


def train_one(workspace: Path, preset: str, device: str, budget_s: float) -> dict[str, object]:
    """One run of train.py; its summary plus the wall time and the packed bundle's size."""
    name, *settings = preset.split("+")
    out = workspace / f"bundle-{safe(preset)}"
    started = time.monotonic()
    subprocess.run(
        [sys.executable, str(STARTER / "train.py"), "--data", "data", "--out", out.name,
         "--budget-s", str(budget_s), "--device", device, "--preset", name,
         *(f"--set={s}" for s in settings)],
        cwd=workspace,
        check=True,
    )  # fmt: skip
    summary: dict[str, object] = json.loads((out / "train_summary.json").read_text())
    summary["wall_s"] = round(time.monotonic() - started, 1)
    summary["packed_bytes"] = pack_bundle(out, workspace / f"{safe(preset)}.tar.gz").packed_bytes
    return summary


def row(preset: str, s: dict[str, object]) -> str:
    model = s["config"]["model"]  # type: ignore[index]
    batch = s["config"]["batch_size"]  # type: ignore[index]

    def pct(key: str) -> str:
        value = s.get(key)
        return f"{value:5.1f}%" if isinstance(value, int | float) else "   n/a"

    return (
        f"{preset:<32} {model['d_model']:>4}x{model['n_layer']:<2} {batch:>5} "  # type: ignore[index]
        f"{s['steps']:>6} {s['bytes_per_s_steady']:>12,.0f} {pct('mfu_steady_percent')} "
        f"{pct('mfu_percent')} {s['best_val_bpb']:>8.4f} {int(s['packed_bytes']) / 1e6:>7.2f}"  # type: ignore[call-overload]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", default="tiny", help="comma-separated starter presets")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--budget-s", type=float, default=120.0)
    parser.add_argument("--corpus", type=Path, help="training text (default: built-in corpus)")
    parser.add_argument("--json", type=Path, help="write every summary here")
    parser.add_argument("--keep", type=Path, help="copy the bundles into this folder")
    args = parser.parse_args()

    print(
        f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} CPUs, "
        f"torch {torch.__version__}, device {args.device}"
        + (f" ({torch.cuda.get_device_name()})" if args.device == "cuda" else ""),
        flush=True,
    )
    summaries: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-train-") as tmp:
        workspace = Path(tmp)
        prepare_train_data(args.corpus, workspace / "data")
        for preset in args.presets.split(","):
            try:
                summaries[preset] = train_one(workspace, preset, args.device, args.budget_s)
            except subprocess.CalledProcessError as exc:  # one failed preset, not the table
                print(f"{preset}: train.py exited with status {exc.returncode}", flush=True)
                continue
            if args.json:  # after every preset: a run cut short keeps the ones it finished
                args.json.write_text(json.dumps(summaries, indent=2) + "\n")
            if args.keep:
                kept = f"bundle-{safe(preset)}"
                shutil.copytree(workspace / kept, args.keep / kept)
    print(f"\nbudget {args.budget_s:.0f} s per preset, device {args.device}")
    print(f"{'preset':<32} width/L batch  steps  bytes/s (st)  MFU st  MFU all  val bpb  packed MB")
    for preset, summary in summaries.items():
        print(row(preset, summary))
    if not summaries:
        sys.exit("error: no preset finished training")
    best = min(summaries, key=lambda p: float(summaries[p]["best_val_bpb"]))  # type: ignore[arg-type]
    print(f"best val bpb at {args.budget_s:.0f} s: {best}")


if __name__ == "__main__":
    main()
