"""benchmarks/bench_step.py: the training step timed alone, per variant, with its time split by
kind of kernel (what the next GPU session reads to choose the starter's shape)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest
from torch.autograd import DeviceType

from tests import benchmark_scripts

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "benchmarks" / "bench_step.py"


def _bench() -> ModuleType:
    return benchmark_scripts.load("bench_step")


def test_variants_are_timed_profiled_and_written(tmp_path: Path) -> None:
    out = tmp_path / "rows.json"
    variants = "micro,micro+export_bits=6,micro+batch_size=2+n_head=4"
    done = subprocess.run(
        [sys.executable, str(BENCH), "--variants", variants, "--warmup", "1", "--steps", "2",
         "--profile", "--profile-steps", "1", "--json", str(out)],
        capture_output=True, text=True, timeout=300, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {r["variant"]: r for r in json.loads(out.read_text())}
    assert list(rows) == variants.split(",")
    for row in rows.values():
        assert row["ms_per_step"] > 0 and row["bytes_per_s"] > 0
        assert row["mfu_percent"] is None  # no peak on CPU
        assert row["profile_ms"]["matmul"] > 0 and row["profile_ms"]["attention"] > 0
        assert row["longest"], row
    # The settings took effect: a smaller batch, four heads, fewer bits packing smaller.
    assert rows["micro+batch_size=2+n_head=4"]["batch"] == 2
    assert "/4h" in rows["micro+batch_size=2+n_head=4"]["shape"]
    assert rows["micro+export_bits=6"]["params"] == rows["micro"]["params"]
    assert rows["micro+export_bits=6"]["packed_mb_estimate"] < rows["micro"]["packed_mb_estimate"]
    assert "where a step's CPU operator time goes" in done.stdout


@pytest.mark.parametrize(
    ("variant", "why"),
    [("nope", "unknown preset"), ("micro+warp=9", "want KEY=VALUE"), ("micro+n_head=3", "heads")],
)
def test_a_bad_variant_is_refused_before_any_runs(variant: str, why: str) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--variants", f"micro,{variant}", "--steps", "1"],
        capture_output=True, text=True, timeout=120, cwd=REPO,
    )  # fmt: skip
    assert done.returncode != 0
    assert why in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "ms/step" not in done.stdout  # micro, first in the list, was not run either


@dataclass
class _Event:
    key: str
    device_type: DeviceType
    self_device_time_total: float = 0.0
    self_cpu_time_total: float = 0.0


def test_gpu_time_counts_each_kernel_once() -> None:
    """The operator that launched a kernel reports the kernel's device time as its own too."""
    bench = _bench()
    events = [
        _Event("aten::mm", DeviceType.CPU, self_device_time_total=900, self_cpu_time_total=50),
        _Event("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", DeviceType.CUDA, 900),
        _Event("aten::_flash_attention_forward", DeviceType.CPU, self_device_time_total=300),
        _Event("pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits>", DeviceType.CUDA, 300),
        _Event("triton_red_fused__to_copy_mean_pow_1", DeviceType.CUDA, 200),
        _Event("void at::native::multi_tensor_apply_kernel<FusedAdam>", DeviceType.CUDA, 100),
        _Event("Memcpy HtoD (Pinned -> Device)", DeviceType.CUDA, 60),
    ]  # fmt: skip
    totals, longest = bench.split_times(events, "cuda", 3)
    assert totals["matmul"] == pytest.approx(0.3)  # 900 us over 3 steps, once
    assert totals["attention"] == pytest.approx(0.1)
    assert totals["fused (triton)"] == pytest.approx(200 / 3000, abs=1e-3)
    assert totals["optimizer + clip"] == pytest.approx(100 / 3000, abs=1e-3)
    assert totals["copy / fill"] == pytest.approx(0.02)
    assert sum(totals.values()) == pytest.approx(1.56 / 3, abs=1e-3)
    assert longest[0] == ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", 0.3)
    # On CPU, operator time is all there is.
    totals, _ = bench.split_times(events, "cpu", 1)
    assert totals["matmul"] == pytest.approx(0.05)


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTN", "matmul"),
        ("triton_tem_fused_mm_0", "matmul"),
        ("fmha_cutlassF_bf16_aligned_64x64_rf_sm80", "attention"),
        ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16", "attention"),
        ("triton_poi_fused_add_mul_0", "fused (triton)"),
        ("void at::native::vectorized_elementwise_kernel<4, FillFunctor<float>>", "copy / fill"),
        ("void at::native::reduce_kernel<512, 1, ReduceOp<MeanOps>>", "elementwise (eager)"),
        ("aten::gelu_backward", "elementwise (eager)"),
        ("ncclKernel_AllReduce", "other"),
    ],
)  # fmt: skip
def test_kernel_names_fall_into_their_kind(name: str, kind: str) -> None:
    assert _bench().category(name) == kind


def test_export_bits_bench_packs_and_scores_each_width(tmp_path: Path) -> None:
    """bench_export_bits.py on a small bundle: one row per width, smaller packs at fewer bits."""
    from export import write_bundle
    from model import GPT, ModelConfig

    from toolkit.text.data import prepare_train_data

    prepare_train_data(None, tmp_path / "data")
    write_bundle(GPT(ModelConfig(block_size=64, n_layer=2, n_head=2, d_model=128)), tmp_path / "b")
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_export_bits.py"), "--bits", "8,5",
         "--bundle", str(tmp_path / "b"), "--data", str(tmp_path / "data"), "--eval-batches", "1"],
        capture_output=True, text=True, timeout=300, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line.split() for line in done.stdout.splitlines() if line.split()[:1] in (["8"], ["5"])]
    assert [r[0] for r in rows] == ["8", "5"], done.stdout
    assert float(rows[1][1]) < float(rows[0][1])  # packed MB
    assert all(0 < float(r[-1]) < 9 for r in rows)  # val bits per byte
