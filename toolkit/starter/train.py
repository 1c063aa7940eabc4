"""Train the starter byte-level GPT for a fixed wall-clock budget, then export a bundle.

    python starter/train.py --data data --out bundles/b1 --budget-s 600

Everything is driven by the clock, because a run is judged on a wall-clock budget (`--max-steps`
also stops it after N steps, for smoke tests):
the learning rate warms up and then decays linearly to zero exactly at the end of the training
time, validation runs every few seconds of wall time, and the export (write + reload + re-check)
is reserved out of the same budget, so the script finishes within `--budget-s` seconds of its
start. The bundle it writes is what `runner submit` expects (see TASK.md, "The bundle").

It exports the weights of the best validation it saw, not those of the last step: a run longer
than its data supports (many epochs of a small corpus) overfits, and its last weights are then
worse than earlier ones. `train_summary.json` records `best_val_bpb`, `best_step`, the last
step's `last_val_bpb` and the bundle's own `exported_val_bpb`.

Sections in reading order: config, data, schedule, evaluation, training loop, export.
"""

from __future__ import annotations

import time

T0 = time.monotonic()  # the budget starts before the (slow) torch import

import argparse  # noqa: E402
import copy  # noqa: E402
import dataclasses  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import asdict, dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from export import bundle_bytes, import_bundle, write_bundle  # noqa: E402
from model import GPT, ModelConfig  # noqa: E402

# ----------------------------------------------------------------------------------------------
# Config


@dataclass
class TrainConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    batch_size: int = 64  # sequences per step (each block_size + 1 bytes)
    lr: float = 2e-3  # peak learning rate
    min_lr_frac: float = 0.0  # the LR decays to lr * min_lr_frac at the end of the budget
    warmup_frac: float = 0.03  # fraction of the training time spent warming up
    weight_decay: float = 0.1  # on matrices only, not on norms or embeddings
    grad_clip: float = 1.0
    eval_every_s: float = 120.0  # wall-clock seconds between validation runs
    eval_batches: int = 8  # validation batches per evaluation (fixed windows: comparable runs)
    export_reserve_frac: float = 0.05  # share of the budget kept for export + round-trip check
    export_reserve_max_s: float = 60.0
    export_reserve_min_s: float = 3.0
    compile: bool = True  # torch.compile on a GPU (compile time counts against the budget)
    compile_mode: str = "default"  # torch.compile's mode, e.g. "max-autotune-no-cudagraphs"
    export_bits: int = 8  # weight matrices exported as signed integers of this many bits (2-8)
    bf16_residual: bool = False  # on a GPU, the residual stream in bf16 (GPT.autocast_residual)
    seed: int = 1337


PRESETS = {
    # One H100 for an hour: 21.6M parameters in 3 layers of width 768 (128-wide heads), its
    # weight matrices exported as 6-bit integers so that the bundle fits 16 MB gzipped (14.7 MB).
    # Chosen from a measured table (benchmarks/bench_train.py on an H100, 60 s each, 2026-11-27):
    # 37.8% MFU and val bpb 2.305, where `mid` trained at 30.4% MFU to 2.420. Wider matrices
    # keep the GPU's matrix units busier; an hour-long table may still choose otherwise.
    "default": TrainConfig(
        model=ModelConfig(n_layer=3, n_head=6, d_model=768),
        export_bits=6,
    ),
    # The default of 2026-11-26: 16.0M parameters in 5 layers of width 512, int8 weights.
    "mid": TrainConfig(),
    # The earlier default: 14.4M parameters in 8 layers of width 384 (slower on a GPU).
    "narrow": TrainConfig(model=ModelConfig(n_layer=8, n_head=6, d_model=384)),
    # Two CPU cores for a few minutes: small enough to learn something in the demo.
    "tiny": TrainConfig(
        # Many small steps beat few big ones when minutes are all there is. The context of 512
        # bytes holds most public-set prompts whole, so their answer bytes share one forward
        # pass in next_byte_logprobs (grading stays quick on a laptop).
        model=ModelConfig(block_size=512, n_layer=4, n_head=4, d_model=128),
        batch_size=4,
        lr=5e-3,
        eval_every_s=20.0,
        eval_batches=4,
        compile=False,
    ),
    # Seconds, not minutes: for tests and smoke runs of the whole pipeline, not for scoring.
    "micro": TrainConfig(
        model=ModelConfig(block_size=128, n_layer=2, n_head=2, d_model=64),
        batch_size=8,
        lr=1e-2,
        eval_every_s=5.0,
        eval_batches=2,
        compile=False,
    ),
}


COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def configure(preset: str, overrides: list[str] | tuple[str, ...] = ()) -> TrainConfig:
    """A copy of `PRESETS[preset]` with `KEY=VALUE` overrides: a field of TrainConfig or of its
    ModelConfig, by name (e.g. `batch_size=128`, `d_model=640`, `export_bits=6`). Raises
    ValueError with a one-line reason for an unknown key, a bad value or an impossible shape."""
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r} (one of {', '.join(sorted(PRESETS))})")
    cfg = copy.deepcopy(PRESETS[preset])
    for item in overrides:
        key, sep, text = item.partition("=")
        key = key.strip()
        owner = cfg.model if key in _fields(ModelConfig) else cfg
        if not sep or key == "model" or key not in _fields(type(owner)):
            known = sorted((_fields(TrainConfig) | _fields(ModelConfig)) - {"model"})
            raise ValueError(f"--set {item!r}: want KEY=VALUE with KEY one of {', '.join(known)}")
        kind = type(getattr(owner, key))
        try:
            value = _parse_bool(text) if kind is bool else kind(text)
        except ValueError:
            raise ValueError(f"--set {item!r}: {text!r} is not a {kind.__name__}") from None
        setattr(owner, key, value)
    m = cfg.model
    if m.d_model % m.n_head or (m.d_model // m.n_head) % 2:
        raise ValueError(f"d_model {m.d_model} must split into {m.n_head} heads of an even width")
    if cfg.compile_mode not in COMPILE_MODES:
        raise ValueError(f"compile_mode {cfg.compile_mode!r}: one of {', '.join(COMPILE_MODES)}")
    if not 2 <= cfg.export_bits <= 8:
        raise ValueError(f"export_bits {cfg.export_bits}: the bundle stores 2 to 8 bits a weight")
    if min(m.n_layer, m.n_head, m.d_model, m.block_size, cfg.batch_size) < 1:
        raise ValueError("sizes (layers, heads, width, context, batch) must be positive")
    return cfg


def _fields(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def _parse_bool(text: str) -> bool:
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(text)


# ----------------------------------------------------------------------------------------------
# Data: flat uint8 files, random windows for training, fixed windows for validation


def load_split(data_dir: Path, name: str) -> np.ndarray:
    path = data_dir / f"{name}.bin"
    if not path.is_file():
        sys.exit(f"error: {path} not found; --data must be the folder holding train.bin/val.bin")
    return np.memmap(path, dtype=np.uint8, mode="r")


def get_batch(data: np.ndarray, cfg: TrainConfig, device: str, rng: np.random.Generator):
    T = cfg.model.block_size
    starts = rng.integers(0, len(data) - T - 1, size=cfg.batch_size)
    return to_device(np.stack([data[s : s + T + 1] for s in starts]), device)


def to_device(windows: np.ndarray, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    xy = torch.from_numpy(windows.astype(np.int64))
    if device == "cuda":
        xy = xy.pin_memory().to(device, non_blocking=True)
    return xy[:, :-1], xy[:, 1:]


def val_windows(val: np.ndarray, cfg: TrainConfig) -> list[np.ndarray]:
    """Evenly spaced windows over val.bin: the same bytes at every evaluation."""
    T = min(cfg.model.block_size, len(val) - 1)
    count = cfg.eval_batches * cfg.batch_size
    starts = np.linspace(0, len(val) - T - 1, num=count).astype(np.int64)
    windows = np.stack([val[s : s + T + 1] for s in starts])
    return [windows[i : i + cfg.batch_size] for i in range(0, count, cfg.batch_size)]


# ----------------------------------------------------------------------------------------------
# Schedule: driven by the fraction of the training time that has elapsed


def get_lr(progress: float, cfg: TrainConfig) -> float:
    if progress < cfg.warmup_frac:
        return cfg.lr * progress / cfg.warmup_frac
    decay = min(1.0, (progress - cfg.warmup_frac) / (1.0 - cfg.warmup_frac))
    return cfg.lr * (1.0 - (1.0 - cfg.min_lr_frac) * decay)


# ----------------------------------------------------------------------------------------------
# Evaluation: bits per byte = cross-entropy in nats / ln 2 (one byte = one token)


@torch.no_grad()
def evaluate_bpb(model: torch.nn.Module, windows: list[np.ndarray], device: str) -> float:
    model.eval()
    total, count = 0.0, 0
    for w in windows:
        x, y = to_device(w, device)
        with autocast(device):
            logits = model(x)
        total += F.cross_entropy(logits.view(-1, 256), y.reshape(-1), reduction="sum").item()
        count += y.numel()
    model.train()
    return total / count / math.log(2)


def autocast(device: str) -> torch.autocast:
    # bf16 on a GPU (tensor cores, no loss scaling needed); plain float32 on CPU.
    return torch.autocast(
        device_type="cuda" if device == "cuda" else "cpu",
        dtype=torch.bfloat16,
        enabled=device == "cuda",
    )


# ----------------------------------------------------------------------------------------------
# The best weights seen so far (kept on the CPU: a copy of ~60 MB for the default preset)


class BestWeights:
    """The weights of the lowest validation bpb offered so far, and the step they come from."""

    def __init__(self) -> None:
        self.bpb = math.inf
        self.step = -1
        self.state: dict[str, torch.Tensor] | None = None

    def offer(self, bpb: float, step: int, model: torch.nn.Module) -> bool:
        """Keep a copy of `model`'s weights if `bpb` beats the best so far; True if it did."""
        if not bpb < self.bpb:  # also refuses NaN
            return False
        self.bpb, self.step = bpb, step
        self.state = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
        return True

    def restore(self, model: torch.nn.Module) -> None:
        """Load the kept weights back into `model` (in place: a compiled wrapper follows)."""
        if self.state is not None:
            model.load_state_dict(self.state)


# ----------------------------------------------------------------------------------------------
# Speed: FLOPs per trained byte and the card's peak, for the model FLOP utilisation (MFU)

GPU_PEAK_BF16 = {"H100": 989e12, "H200": 989e12, "A100": 312e12}
"""Dense bf16 datasheet peaks (SXM), FLOP/s, by a name the device's name contains."""


def flops_per_byte(model: GPT) -> float:
    """Training FLOPs per byte (= token): 6 x the parameters of every matrix multiply (Linear
    layers, the output head included, embeddings excluded), plus causal attention, 6 x layers x
    context x width (QK^T and AV over half the context on average, forward + backward)."""
    cfg = model.cfg
    matmul = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    return 6 * matmul + 6 * cfg.n_layer * cfg.block_size * cfg.d_model


def peak_flops(device: str) -> float | None:
    """The card's dense bf16 peak, or None (CPU, or a card not in the table)."""
    if device != "cuda":
        return None
    name = torch.cuda.get_device_name()
    return next((v for k, v in GPU_PEAK_BF16.items() if k in name), None)


class Speed:
    """Bytes per second and MFU since the first step that did not compile (synchronised)."""

    def __init__(self, per_byte: float, peak: float | None, device: str) -> None:
        self.per_byte, self.peak, self.device = per_byte, peak, device
        self.start: float | None = None
        self.start_seen = 0

    def mark(self, seen: int) -> None:
        """Start counting here (after the compiling first step)."""
        if self.device == "cuda":
            torch.cuda.synchronize()
        self.start, self.start_seen = time.monotonic(), seen

    def rate(self, seen: int) -> float:
        """Bytes per second since `mark` (the caller has synchronised, e.g. with .item())."""
        if self.start is None or time.monotonic() <= self.start:
            return 0.0
        return (seen - self.start_seen) / (time.monotonic() - self.start)

    def text(self, seen: int) -> str:
        rate = self.rate(seen)
        mfu = f", MFU {100 * rate * self.per_byte / self.peak:.1f}%" if self.peak else ""
        return f"{rate:,.0f} bytes/s{mfu}"


# ----------------------------------------------------------------------------------------------
# Training step: the loss (on a GPU through the compiled model), then the update

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def build_model(cfg: TrainConfig, device: str) -> GPT:
    """The preset's model on `device`, set up for training as `cfg` says."""
    model = GPT(cfg.model).to(device)
    model.autocast_residual = cfg.bf16_residual
    return model


def build_optimizer(model: GPT, cfg: TrainConfig, device: str) -> torch.optim.Optimizer:
    """AdamW, weight decay on the weight matrices only (not on norms or the embedding)."""
    matrices = [p for p in model.parameters() if p.ndim == 2 and p is not model.embed.weight]
    others = [p for p in model.parameters() if p.ndim != 2 or p is model.embed.weight]
    return torch.optim.AdamW(
        [
            {"params": matrices, "weight_decay": cfg.weight_decay},
            {"params": others, "weight_decay": 0.0},
        ],
        lr=cfg.lr,
        betas=(0.9, 0.95),
        fused=device == "cuda",
    )


def loss_function(model: torch.nn.Module, device: str) -> LossFn:
    """The mean cross-entropy of each next byte under `model` (the GPT, or its compiled
    wrapper), with bf16 autocast on a GPU. The rotary tables are made here, once per length,
    outside the compiled graph (`GPT.forward`'s `rope`: 10 ms of a 34-ms H100 step)."""
    tables: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def loss_of(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        length = x.shape[1]
        if length not in tables:
            tables[length] = model.rope(length, x.device)  # type: ignore[operator]
        with autocast(device):
            logits = model(x, rope=tables[length])
        return F.cross_entropy(logits.view(-1, 256), y.reshape(-1))

    return loss_of


def update(
    model: GPT, optimizer: torch.optim.Optimizer, loss: torch.Tensor, cfg: TrainConfig
) -> None:
    """One optimizer step on `loss` (gradients clipped to `cfg.grad_clip`)."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
    optimizer.step()


# ----------------------------------------------------------------------------------------------
# Training loop


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--data", type=Path, required=True, help="folder with train.bin and val.bin")
    p.add_argument("--out", type=Path, required=True, help="bundle folder to write")
    p.add_argument("--budget-s", type=float, required=True, help="wall-clock seconds, all in")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        default=None,
        help="model size (default: 'default' on a GPU, 'tiny' on CPU)",
    )
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile on a GPU")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="change one setting of the preset (repeatable), e.g. --set d_model=640 "
        "--set n_layer=3 --set batch_size=128 --set export_bits=6",
    )
    p.add_argument(
        "--eval-every-s", type=float, default=None, help="seconds between validations (preset's)"
    )
    p.add_argument(
        "--max-steps",
        type=int,
        default=None,
        help="stop after this many steps, if the budget has not stopped it first (a fixed amount "
        "of work, e.g. for a smoke test: the same model however busy the machine)",
    )
    return p.parse_args()


def main() -> None:
    args = parse_args()
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        cfg = configure(args.preset or ("default" if device == "cuda" else "tiny"), args.set)
    except ValueError as exc:
        sys.exit(f"error: {exc}")
    if args.seed is not None:
        cfg.seed = args.seed
    if args.eval_every_s is not None:
        cfg.eval_every_s = args.eval_every_s
    reserve = min(
        cfg.export_reserve_max_s,
        max(cfg.export_reserve_min_s, cfg.export_reserve_frac * args.budget_s),
    )
    train_deadline = T0 + args.budget_s - reserve
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    train, val = load_split(args.data, "train"), load_split(args.data, "val")
    windows = val_windows(val, cfg)
    model = build_model(cfg, device)
    print(f"torch {torch.__version__} on {device}, python {platform.python_version()}")
    print(f"model: {model.num_params() / 1e6:.2f}M parameters, config {asdict(cfg.model)}")
    print(
        f"data: {len(train):,} train bytes, {len(val):,} val bytes; budget {args.budget_s:.0f}s "
        f"({reserve:.0f}s kept for export)"
    )

    optimizer = build_optimizer(model, cfg, device)
    plain_loss = loss_function(model, device)
    compiled = device == "cuda" and cfg.compile and not args.no_compile
    if compiled:
        loss_fn = loss_function(torch.compile(model, mode=cfg.compile_mode), device)
    else:
        loss_fn = plain_loss
    speed = Speed(flops_per_byte(model), peak_flops(device), device)

    # The export evaluates the reloaded bundle (plus one batch twice): keep room for that,
    # measured on a first evaluation at step 0 (which is also the untrained baseline).
    t = time.monotonic()
    bpb = evaluate_bpb(model, windows, device)
    eval_s = time.monotonic() - t
    print(f"step      0 | {time.monotonic() - T0:7.1f}s | val bpb {bpb:.4f}", flush=True)
    best = BestWeights()
    best.offer(bpb, 0, model)
    train_start = time.monotonic()
    next_eval = train_start + cfg.eval_every_s
    step, seen, step_s = 0, 0, 0.0
    last_eval = (0, bpb)  # (step, val bpb) of the latest validation
    while True:
        # Stop when the next step would eat into the time the export needs: one evaluation of
        # the last weights, then the export's own. (Margins of 2x: on a shared machine a step
        # or an evaluation can slow down later.)
        deadline = train_deadline - min(3 * eval_s, args.budget_s / 2)
        now = time.monotonic()
        if now + 2 * step_s >= deadline or step == args.max_steps:
            break
        progress = (now - train_start) / max(1e-3, deadline - train_start)
        if args.max_steps:  # the schedule ends with whichever limit comes first
            progress = max(progress, step / args.max_steps)
        for group in optimizer.param_groups:
            group["lr"] = get_lr(min(1.0, progress), cfg)
        x, y = get_batch(train, cfg, device, rng)
        try:
            loss = loss_fn(x, y)
        except Exception as exc:  # torch.compile could not build here: train without it
            if loss_fn is plain_loss:
                raise
            print(f"torch.compile failed ({type(exc).__name__}); training without it", flush=True)
            loss_fn = plain_loss
            loss = loss_fn(x, y)
        update(model, optimizer, loss, cfg)
        step += 1
        seen += x.numel()
        if step > 1:  # the first step includes torch.compile: not a step time
            step_s = time.monotonic() - now
        else:
            speed.mark(seen)
        if time.monotonic() >= next_eval and time.monotonic() + eval_s < deadline:
            t = time.monotonic()
            bpb = evaluate_bpb(model, windows, device)
            eval_s = max(eval_s, time.monotonic() - t)
            kept = best.offer(bpb, step, model)
            last_eval = (step, bpb)
            print(
                f"step {step:6d} | {time.monotonic() - T0:7.1f}s | train loss {loss.item():.3f} | "
                f"val bpb {bpb:.4f}{' (best)' if kept else ''} | {speed.text(seen)}",
                flush=True,
            )
            next_eval = time.monotonic() + cfg.eval_every_s
    if device == "cuda":
        torch.cuda.synchronize()
    train_s = time.monotonic() - train_start
    steady = speed.rate(seen)
    overall = seen / max(train_s, 1e-9)
    mfu_of = (lambda r: round(100 * r * speed.per_byte / speed.peak, 2)) if speed.peak else None
    print(
        f"trained {step} steps, {seen:,} bytes in {train_s:.1f}s: {overall:,.0f} bytes/s "
        f"overall (compile and validations included), {speed.text(seen)} after the first step"
    )
    # The last weights are a candidate too; then the best of all is what gets exported.
    last_bpb = last_eval[1] if last_eval[0] == step else evaluate_bpb(model, windows, device)
    best.offer(last_bpb, step, model)
    if best.step != step:
        best.restore(model)
    print(
        f"last step {step}: val bpb {last_bpb:.4f}; exporting step {best.step}: "
        f"val bpb {best.bpb:.4f}",
        flush=True,
    )

    # ------------------------------------------------------------------------------------------
    # Export: write the bundle, load it back the way the grader will, and check that it computes
    # what the trained model computes (on one validation batch: int8 rounding may cost a little).
    export_start = time.monotonic()
    float_bpb = evaluate_bpb(model, windows[:1], device)
    write_bundle(model, args.out, bits=cfg.export_bits)
    bundle = import_bundle(args.out).load(str(args.out), device)
    reloaded_bpb = evaluate_bpb(bundle.gpt, windows[:1], device)
    # The bundle's own val bpb on every window, if the budget still allows it.
    full_eval = time.monotonic() + eval_s < T0 + args.budget_s
    final_bpb = evaluate_bpb(bundle.gpt, windows, device) if full_eval else reloaded_bpb
    print(f"bundle val bpb {final_bpb:.4f} (first batch: {reloaded_bpb:.4f} vs {float_bpb:.4f})")
    sample = bundle.generate([b"The ", b""], [16, 4])
    logprobs = bundle.next_byte_logprobs([b"The "])
    problems = []
    if not math.isfinite(reloaded_bpb) or reloaded_bpb > float_bpb + 0.05:
        problems.append(f"reloaded val bpb {reloaded_bpb:.4f} vs trained {float_bpb:.4f}")
    if [len(s) for s in sample] != [16, 4]:
        problems.append(f"generate returned lengths {[len(s) for s in sample]}, wanted [16, 4]")
    if logprobs.shape != (1, 256) or not np.isfinite(logprobs).all():
        problems.append(f"next_byte_logprobs returned shape {logprobs.shape} or non-finite values")
    summary = {
        "preset": args.preset or ("default" if device == "cuda" else "tiny"),
        "device": device,
        "torch": torch.__version__,
        "steps": step,
        "train_bytes_seen": seen,
        "train_s": round(train_s, 2),
        "bytes_per_s": round(overall, 1),
        "bytes_per_s_steady": round(steady, 1),
        "flops_per_byte": speed.per_byte,
        "peak_flops": speed.peak,
        "mfu_percent": mfu_of(overall) if mfu_of else None,
        "mfu_steady_percent": mfu_of(steady) if mfu_of else None,
        "compiled": loss_fn is not plain_loss,
        "val_bpb": round(final_bpb, 4),
        "best_val_bpb": round(best.bpb, 4),
        "best_step": best.step,
        "last_val_bpb": round(last_bpb, 4),
        "exported_val_bpb": round(final_bpb, 4) if full_eval else None,
        "check_bpb_float": round(float_bpb, 4),
        "check_bpb_bundle": round(reloaded_bpb, 4),
        "bundle_bytes": bundle_bytes(args.out),
        "export_s": round(time.monotonic() - export_start, 2),
        "elapsed_s": round(time.monotonic() - T0, 2),
        "config": asdict(cfg),
    }
    (args.out / "train_summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(
        f"bundle {args.out}: {summary['bundle_bytes']:,} bytes unpacked, val bpb "
        f"{final_bpb:.4f}, sample {sample[0]!r}; total {summary['elapsed_s']:.1f}s"
    )
    if problems:
        sys.exit("error: the bundle did not round-trip: " + "; ".join(problems))


if __name__ == "__main__":
    main()
