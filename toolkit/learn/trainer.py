"""Train the starter's model on a family's training text, then export it as a starter bundle.

The loop is the starter's (its model, optimizer and autocast from `train.py`; warm-up, the
rate held, then a linear decay to zero over the last `Scale.decay_share` of the steps; gradient
clipping), with two differences an agent who had read the formats would make too: the loss is
weighted per byte (`corpus`), so the answers count fully, the rest of a document a little and
the masks not at all; and where the family has a tier-1 register, the first `Scale.small_share`
of the steps trains on its smallest register (`corpus.smallest`). One example is one document,
padded at the end; a document longer than the context is cut to a window that ends just after
a random answer byte.
"""

from __future__ import annotations

import importlib.util
import math
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from toolkit.learn.corpus import Corpus, Example, repeated
from toolkit.learn.scale import Scale

STARTER_DIR = Path(__file__).resolve().parent.parent / "starter"


def starter_module(name: str) -> ModuleType:
    """`toolkit/starter/<name>.py` (`train`, `export`), loaded once per process. The starter is a
    folder of scripts that import one another by bare name, so its folder goes on `sys.path`."""
    if str(STARTER_DIR) not in sys.path:
        sys.path.insert(0, str(STARTER_DIR))
    key = f"ari_starter_{name}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, STARTER_DIR / f"{name}.py")
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load the starter's {name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Trained:
    """What one family's training did."""

    steps: int
    bytes_seen: int
    documents: int
    final_loss: float
    """The weighted loss (nats per answer-weighted byte), averaged over the last steps."""
    seconds: float
    budget: int = 0
    """The steps it was given."""
    cut: bool = False
    """A cap in seconds stopped it before its budget."""


Tick = Callable[[float, int, float], None]
"""Called after each step with (elapsed seconds, steps done, recent loss): a progress bar."""


def _batch(examples: list[Example], block: int, rng: random.Random) -> tuple[Any, Any, Any]:
    """(inputs, targets, weights) tensors of one batch, documents padded at the end."""
    import torch

    rows = []
    for ex in examples:
        data, weights = ex.data, ex.weights
        if len(data) > block + 1:  # a window that ends just after a weighted byte
            ends = [i + 1 for i, w in enumerate(weights) if w > 0 and i >= block] or [len(data)]
            end = rng.choice(ends)
            data, weights = data[end - block - 1 : end], weights[end - block - 1 : end]
        rows.append((data, weights))
    width = max(len(d) for d, _ in rows)
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    wts = torch.zeros((len(rows), width))
    for i, (data, weights) in enumerate(rows):
        ids[i, : len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8).long()
        wts[i, : len(weights)] = torch.tensor(weights)
    return ids[:, :-1], ids[:, 1:], wts[:, 1:]


def learning_rate(scale: Scale, progress: float) -> float:
    """The rate at `progress` (0 to 1) of the steps: a linear warm-up over `warmup_frac`, held,
    then a linear decay to zero over the last `decay_share`."""
    warm = min(1.0, progress / scale.warmup_frac) if scale.warmup_frac else 1.0
    decay = min(1.0, (1.0 - progress) / scale.decay_share) if scale.decay_share else 1.0
    return scale.lr * warm * max(0.0, decay)


def train_family(
    corpus: Corpus,
    scale: Scale,
    out_dir: Path,
    *,
    steps: int,
    seconds: float | None = None,
    small: Corpus | None = None,
    seed: int = 0,
    tick: Tick | None = None,
) -> Trained:
    """Train a fresh starter model of `scale`'s shape on `corpus` for `steps` steps (fewer
    where a cap of `seconds` of wall time comes first: `Trained.cut`), the first
    `scale.small_share` of the steps on `small` where given (the smallest register), then
    write its bundle to `out_dir` (the starter's own export). The schedule (warm-up, the
    smallest register, the decay) follows the steps, so the same `steps` and `seed` train the
    same model however loaded the box is."""
    import torch
    import torch.nn.functional as F

    # The starter's own pieces: its model, its optimizer (AdamW, weight decay on the matrices
    # only, fused on a GPU) and its autocast (bf16 on a GPU), as an agent's training uses them.
    train, export = starter_module("train"), starter_module("export")
    torch.manual_seed(seed)
    rng = random.Random(seed)
    shape = scale.shape
    cfg = train.TrainConfig(
        model=train.ModelConfig(
            block_size=shape.block_size,
            n_layer=shape.n_layer,
            n_head=shape.n_head,
            d_model=shape.d_model,
        ),
        batch_size=scale.batch_size,
        lr=scale.lr,
    )
    device = scale.device
    model = train.build_model(cfg, device)
    optimizer = train.build_optimizer(model, cfg, device)
    start = time.monotonic()
    done, seen = 0, 0
    recent: list[float] = []
    cut = False
    while done < steps:
        if seconds is not None and time.monotonic() - start >= seconds:
            cut = True
            break
        progress = done / steps
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(scale, progress)
        source = small if small is not None and progress < scale.small_share else corpus
        if scale.batch_bytes is not None:
            examples = source.take_bytes(scale.batch_bytes, shape.block_size)
        else:
            examples = source.take(scale.batch_size)
        if progress < scale.copy_share:
            examples = [repeated(ex) for ex in examples]
        batch = _batch(examples, shape.block_size, rng)
        x, y, w = (t.to(device) for t in batch)
        with train.autocast(device):
            logits = model(x)
        per_byte = F.cross_entropy(logits.float().reshape(-1, 256), y.reshape(-1), reduction="none")
        loss = (per_byte * w.reshape(-1)).sum() / w.sum().clamp(min=1e-6)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        done += 1
        seen += int(x.numel())
        recent = [*recent[-49:], float(loss.item())]
        if tick is not None:
            tick(time.monotonic() - start, done, sum(recent) / len(recent))
    trained_s = time.monotonic() - start
    model.eval()
    export.write_bundle(model.to("cpu"), out_dir, bits=scale.export_bits)
    final = sum(recent) / len(recent) if recent else math.nan
    documents = corpus.documents + (small.documents if small is not None else 0)
    return Trained(done, seen, documents, final, trained_s, steps, cut)
