"""How fast does the starter train? Bytes per second, model FLOP utilisation, val bpb after N s.

Runs `starter/train.py` exactly as an agent would (a subprocess, from a workspace-like folder on
the prepared default corpus), then reads its `train_summary.json`.

FLOPs counted per trained byte (= token): 6 x (parameters in matrix multiplies: every Linear,
the output head included, embeddings excluded) + attention, 6 x layers x context x width for
causal attention (QK^T and AV over on average half the context, forward + backward = 3x the
forward). MFU divides the achieved rate by a peak: on a GPU, the dense bf16 peak of the card
(H100/H200 SXM: 989 TFLOP/s); on CPU, the float32 matmul rate measured here on a large square
matmul (an achievable peak, not a datasheet number: CPU MFU is only a sanity check).

    python benchmarks/bench_train.py [--preset tiny|default] [--device cpu|cuda] [--budget-s 120]
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

import torch

REPO = Path(__file__).resolve().parents[1]
STARTER = REPO / "toolkit" / "starter"
sys.path.insert(0, str(STARTER))

from model import GPT, ModelConfig  # noqa: E402

from toolkit.data import prepare_train_data  # noqa: E402

GPU_PEAK_BF16 = {"H100": 989e12, "H200": 989e12, "A100": 312e12}


def flops_per_byte(cfg: ModelConfig) -> float:
    model = GPT(cfg)
    matmul_params = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    return 6 * matmul_params + 6 * cfg.n_layer * cfg.block_size * cfg.d_model


def cpu_matmul_peak(size: int = 2048, repeat: int = 5) -> float:
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b  # warm-up
    started = time.perf_counter()
    for _ in range(repeat):
        a @ b
    return 2 * size**3 * repeat / (time.perf_counter() - started)


def peak(device: str) -> tuple[float, str]:
    if device == "cuda":
        name = torch.cuda.get_device_name()
        for key, value in GPU_PEAK_BF16.items():
            if key in name:
                return value, f"{name} dense bf16 datasheet peak"
        return float("nan"), f"{name}: unknown peak"
    return cpu_matmul_peak(), "float32 2048x2048 matmul measured now"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="tiny", choices=["tiny", "default"])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--budget-s", type=float, default=120.0)
    args = parser.parse_args()

    print(
        f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} CPUs, "
        f"torch {torch.__version__}, device {args.device}"
        + (f" ({torch.cuda.get_device_name()})" if args.device == "cuda" else "")
    )
    with tempfile.TemporaryDirectory(prefix="bench-train-") as tmp:
        workspace = Path(tmp)
        prepare_train_data(None, workspace / "data")
        peak_flops, peak_what = peak(args.device)
        started = time.monotonic()
        subprocess.run(
            [
                sys.executable,
                str(STARTER / "train.py"),
                "--data",
                "data",
                "--out",
                "b",
                "--budget-s",
                str(args.budget_s),
                "--device",
                args.device,
                "--preset",
                args.preset,
            ],
            cwd=workspace,
            check=True,
        )
        wall = time.monotonic() - started
        summary = json.loads((workspace / "b" / "train_summary.json").read_text())

    cfg = ModelConfig(**summary["config"]["model"])
    per_byte = flops_per_byte(cfg)
    rate = summary["train_bytes_seen"] / summary["train_s"]
    achieved = rate * per_byte
    print(
        f"\npreset {args.preset}: {summary['steps']} steps, {summary['train_bytes_seen']:,} "
        f"bytes in {summary['train_s']:.1f} s of training ({wall:.1f} s wall, budget "
        f"{args.budget_s:.0f} s, export {summary['export_s']:.1f} s)"
    )
    print(
        f"throughput: {rate:,.0f} bytes/s; {per_byte / 1e6:.1f} MFLOP per byte; "
        f"{achieved / 1e12:.4f} TFLOP/s"
    )
    print(
        f"MFU: {100 * achieved / peak_flops:.1f}% of {peak_flops / 1e12:.3f} TFLOP/s ({peak_what})"
    )
    print(f"val bpb after {args.budget_s:.0f} s: {summary['val_bpb']:.4f}")


if __name__ == "__main__":
    main()
