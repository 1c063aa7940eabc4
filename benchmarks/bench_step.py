"""How fast is one training step of the starter, and where does its time go?

The MFU of a whole run (`bench_train.py`) says how far the starter is from the card's peak, not
why. This times the training step alone, for several shapes and settings in one call, and splits
its device time by kind of kernel, so a change is chosen from measurements:

    python benchmarks/bench_step.py --device cuda --profile \\
        --variants default,narrow,default+n_head=4,default+d_model=640+n_layer=3+n_head=10

A variant is a preset of `starter/train.py`, optionally with settings changed the way
`train.py --set KEY=VALUE` changes them, joined by "+" (`default+batch_size=128`,
`default+compile_mode=max-autotune-no-cudagraphs`, `default+export_bits=6+n_layer=6`). For each,
the model, optimizer and (on a GPU) compiled model are built by train.py's own functions; batches
come from train.py's `get_batch` on random bytes (speed does not depend on what the bytes say);
`--warmup` steps run first (the first one compiles), then `--steps` steps are timed between two
synchronisations. Printed per variant: parameters, the packed size of its int weights (estimated:
the bytes gzip leaves of a freshly initialised model's export), milliseconds per step, bytes (=
tokens) per second, MFU as train.py counts it (no MFU on CPU), and peak GPU memory.

With `--profile`, a few more steps run under torch.profiler and their time is split into: matrix
multiplies, attention, fused elementwise kernels (Triton, what torch.compile writes), eager
elementwise and reductions, the optimizer and gradient clipping, copies and fills, and the rest;
then the longest kernels by name. On a GPU that is device (kernel) time; on CPU, operator time.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import platform
import sys
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from starter_bundle import starter_module, variant

CATEGORIES = (
    "matmul",
    "attention",
    "fused (triton)",
    "elementwise (eager)",
    "optimizer + clip",
    "copy / fill",
    "other",
)


def category(name: str) -> str:
    """The kind of a kernel (GPU) or operator (CPU), from its name."""
    n = name.lower()
    if any(k in n for k in ("flash", "fmha", "attention", "sdpa", "scaled_dot_product")):
        return "attention"
    if "triton" in n and not any(k in n for k in ("triton_tem", "_mm_", "matmul")):
        return "fused (triton)"
    matmul = ("gemm", "xmma", "cutlass", "nvjet", "wgmma", "cublas", "triton_tem", "matmul")
    if any(k in n for k in matmul) or n in ("aten::mm", "aten::addmm", "aten::bmm"):
        return "matmul"
    if any(k in n for k in ("adam", "multi_tensor", "foreach", "clip_grad")):
        return "optimizer + clip"
    if any(k in n for k in ("memcpy", "memset", "copy", "fill", "aten::to", "aten::zero")):
        return "copy / fill"
    eager = ("elementwise", "reduce_kernel", "softmax", "gelu", "aten::", "at::native")
    if any(k in n for k in eager):
        return "elementwise (eager)"
    return "other"


@dataclass
class Row:
    variant: str
    params: int
    shape: str
    batch: int
    packed_mb_estimate: float
    ms_per_step: float
    bytes_per_s: float
    mfu_percent: float | None
    peak_memory_gb: float | None
    compiled: bool
    seconds: float = 0.0  # the variant's whole measurement, compile included
    profile_ms: dict[str, float] = field(default_factory=dict)
    longest: list[tuple[str, float]] = field(default_factory=list)


def packed_estimate(export: Any, model: torch.nn.Module, bits: int) -> float:
    """MB that gzip leaves of the model's int weights (the config and code add a few KB)."""
    buffer = io.BytesIO()
    torch.save({"tensors": export.quantize_state(model, bits)}, buffer)
    return len(gzip.compress(buffer.getvalue(), compresslevel=6)) / 1e6


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def measure(spec: str, device: str, warmup: int, steps: int, profile_steps: int) -> Row:
    train, export = starter_module("train"), starter_module("export")
    cfg = variant(spec)
    torch.manual_seed(cfg.seed)
    model = train.build_model(cfg, device)
    optimizer = train.build_optimizer(model, cfg, device)
    plain = train.loss_function(model, device)
    compiled = device == "cuda" and cfg.compile
    if compiled:
        loss_fn = train.loss_function(torch.compile(model, mode=cfg.compile_mode), device)
    else:
        loss_fn = plain
    data = np.random.default_rng(0).integers(0, 256, size=8_000_000, dtype=np.uint8)
    rng = np.random.default_rng(1)

    def step() -> None:
        x, y = train.get_batch(data, cfg, device, rng)
        train.update(model, optimizer, loss_fn(x, y), cfg)

    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    for _ in range(warmup):
        step()
    sync(device)
    started = time.perf_counter()
    for _ in range(steps):
        step()
    sync(device)
    seconds = (time.perf_counter() - started) / steps
    tokens = cfg.batch_size * cfg.model.block_size
    peak = train.peak_flops(device)
    rate = tokens / seconds
    m = cfg.model
    row = Row(
        variant=spec,
        params=model.num_params(),
        shape=f"{m.n_layer}x{m.d_model}/{m.n_head}h ctx {m.block_size}",
        batch=cfg.batch_size,
        packed_mb_estimate=round(packed_estimate(export, model, cfg.export_bits), 2),
        ms_per_step=round(1000 * seconds, 3),
        bytes_per_s=round(rate, 1),
        mfu_percent=round(100 * rate * train.flops_per_byte(model) / peak, 2) if peak else None,
        peak_memory_gb=round(torch.cuda.max_memory_allocated() / 2**30, 2)
        if device == "cuda"
        else None,
        compiled=compiled,
    )
    if profile_steps:
        row.profile_ms, row.longest = profile(step, device, profile_steps)
    torch._dynamo.reset()  # the next variant compiles afresh (this one's memory goes with it)
    if device == "cuda":
        torch.cuda.empty_cache()
    return row


def profile(step: Any, device: str, count: int) -> tuple[dict[str, float], list[tuple[str, float]]]:
    """Milliseconds per step by category, and the 8 longest kernels (or operators) per step."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as profiler

    activities = [ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profiler(activities=activities) as prof:
        for _ in range(count):
            step()
        sync(device)
    return split_times(prof.key_averages(), device, count)


def split_times(
    events: Any, device: str, count: int
) -> tuple[dict[str, float], list[tuple[str, float]]]:
    """Per step: milliseconds by category and the 8 longest names, from a profile's averages.

    On a GPU only the kernels count: the operator that launched a kernel carries the same device
    time as "self" time too, and counting both would double every matrix multiply."""
    from torch.autograd import DeviceType

    by_name: dict[str, float] = defaultdict(float)
    for event in events:
        if device == "cuda":
            if event.device_type == DeviceType.CPU:
                continue
            us = event.self_device_time_total
        else:
            us = event.self_cpu_time_total
        if us > 0:
            by_name[event.key] += us / 1000 / count
    totals = dict.fromkeys(CATEGORIES, 0.0)
    for name, ms in by_name.items():
        totals[category(name)] += ms
    longest = sorted(by_name.items(), key=lambda item: -item[1])[:8]
    return {k: round(v, 3) for k, v in totals.items()}, [(n, round(ms, 3)) for n, ms in longest]


def print_rows(rows: list[Row], device: str) -> None:
    print(f"\n{'variant':<44} {'params':>7} {'packed':>7} {'ms/step':>8} {'bytes/s':>12} "
          f"{'MFU':>6} {'mem GB':>6}")  # fmt: skip
    for r in rows:
        mfu = f"{r.mfu_percent:5.1f}%" if r.mfu_percent is not None else "   n/a"
        mem = f"{r.peak_memory_gb:6.1f}" if r.peak_memory_gb is not None else "   n/a"
        print(
            f"{r.variant:<44} {r.params / 1e6:6.2f}M {r.packed_mb_estimate:5.2f}MB "
            f"{r.ms_per_step:8.2f} {r.bytes_per_s:12,.0f} {mfu} {mem}"
        )
    profiled = [r for r in rows if r.profile_ms]
    if not profiled:
        return
    what = "device (kernel) time" if device == "cuda" else "CPU operator time"
    print(f"\nwhere a step's {what} goes, ms per step (share of the profiled total):")
    for r in profiled:
        total = sum(r.profile_ms.values()) or 1.0
        parts = ", ".join(
            f"{k} {v:.2f} ({100 * v / total:.0f}%)" for k, v in r.profile_ms.items() if v > 0
        )
        print(f"  {r.variant}: total {total:.2f} ms | {parts}")
        for name, ms in r.longest:
            print(f"      {ms:8.3f} ms  {name[:110]}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="example: python benchmarks/bench_step.py --device cuda --profile "
        "--variants default,default+n_head=4,default+batch_size=128",
    )
    parser.add_argument("--variants", default="tiny", help="comma-separated variants (see top)")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--warmup", type=int, default=5, help="steps before timing (compiles)")
    parser.add_argument("--steps", type=int, default=20, help="steps timed")
    parser.add_argument("--profile", action="store_true", help="split the time by kernel kind")
    parser.add_argument("--profile-steps", type=int, default=3)
    parser.add_argument("--json", type=Path, help="write every row here")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("error: --device cuda, but this torch cannot use a GPU here")
    if args.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    for spec in variants:  # every variant checked before the first one runs
        try:
            variant(spec)
        except ValueError as exc:
            sys.exit(f"error: variant {spec!r}: {exc}")
    print(
        f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} CPUs, "
        f"torch {torch.__version__}, device {args.device}"
        + (f" ({torch.cuda.get_device_name()})" if args.device == "cuda" else ""),
        flush=True,
    )
    rows: list[Row] = []
    for spec in variants:
        started = time.monotonic()
        try:
            row = measure(
                spec, args.device, args.warmup, args.steps, args.profile_steps * args.profile
            )
        except torch.OutOfMemoryError:
            print(f"{spec}: out of GPU memory, skipped", flush=True)
            torch._dynamo.reset()
            torch.cuda.empty_cache()
            continue
        row.seconds = round(time.monotonic() - started, 1)
        rows.append(row)
        mfu = f", MFU {row.mfu_percent:.1f}%" if row.mfu_percent is not None else ""
        print(
            f"{spec}: {row.ms_per_step:.2f} ms/step, {row.bytes_per_s:,.0f} bytes/s{mfu} "
            f"({row.seconds:.0f} s with compile)",
            flush=True,
        )
        if args.json:  # after every variant: a run cut short by its time limit keeps its rows
            args.json.write_text(json.dumps([asdict(r) for r in rows], indent=2) + "\n")
    print_rows(rows, args.device)


if __name__ == "__main__":
    main()
