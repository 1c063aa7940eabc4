"""A small byte-level GPT: the starter model, shared by training and by the exported bundle.

Vocabulary = the 256 byte values, so there is no tokenizer to ship or to get wrong. The blocks
are pre-norm (RMSNorm), attention uses rotary position embeddings (RoPE) and PyTorch's
`scaled_dot_product_attention` (flash attention on a GPU), and the MLP is a plain GELU MLP.

This file is copied verbatim into every bundle, next to `inference.py`, so it must only import
torch and the standard library.

Batched inference with prompts of different lengths uses *left padding*: every row is padded on
the left to the longest prompt, pad keys are masked out of attention, and each row's positions
start at 0 at its first real byte. Because RoPE is relative and pads are invisible, a padded row
computes the same thing as the same prompt alone; the KV cache then grows by one column per step
for the whole batch.

Decoding has no per-shape cost: a step attends over the cache's whole preallocated capacity
with a fixed-shape mask of the columns written so far (a few matrix products, no attention
kernel chosen per shape), so every step of a batch has the same shapes. A prefill with a mask
uses `scaled_dot_product_attention` without the cuDNN backend (which builds a graph for each new
shape), and on a GPU a batch's width is rounded up to a multiple of `WIDTH_BUCKET` columns of
padding, so a grading meets a handful of shapes instead of one per batch.

Generation goes in passes of a fixed number of bytes, each from the texts so far cut to fit the
block: what is written first does not depend on how many bytes are asked (`GPT.generate`).
"""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

WIDTH_BUCKET = 64
"""On a GPU, a padded batch's width is a multiple of this (fewer distinct shapes)."""


@contextlib.contextmanager
def inference_attention(device: torch.device) -> Iterator[None]:
    """Masked attention without cuDNN's backend on a GPU: it builds a graph per new shape, which
    costs seconds over a grading whose shapes change with every batch. Elsewhere, as it is."""
    kernels = None
    if device.type == "cuda":
        try:
            from torch.nn.attention import SDPBackend, sdpa_kernel

            kernels = sdpa_kernel(
                [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
            )
        except (ImportError, AttributeError):  # an older torch: its defaults
            kernels = None
    with kernels if kernels is not None else contextlib.nullcontext():
        yield


def decode_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> Tensor:
    """Attention of one new query per row (B, H, 1, D) over keys and values (B, H, S, D), with
    `mask` (B, 1, 1, S) True where a key counts. Plain matrix products of fixed shapes (S is the
    cache's capacity, not its length): the same kernels at every step."""
    scores = (q @ k.transpose(-1, -2)).float() * (q.shape[-1] ** -0.5)
    scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(-1).to(v.dtype) @ v


@dataclass
class ModelConfig:
    vocab_size: int = 256  # bytes
    block_size: int = 1024  # longest context trained on (the grader sends at most 1,024 bytes)
    n_layer: int = 5
    n_head: int = 8
    d_model: int = 512
    mlp_ratio: int = 4
    rope_base: float = 10000.0

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


# ----------------------------------------------------------------------------------------------
# Building blocks


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: Tensor) -> Tensor:
        # Normalise in float32 for stability under bf16 autocast.
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return xf.type_as(x) * self.weight


def rope_tables(positions: Tensor, head_dim: int, base: float) -> tuple[Tensor, Tensor]:
    """cos/sin tables for `positions` (any shape), shape positions.shape + (head_dim/2,)."""
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, device=positions.device) / head_dim))
    angles = positions.float()[..., None] * inv_freq
    return angles.cos(), angles.sin()


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate pairs (x1, x2) of the last dim; x is (B, H, T, D), cos/sin (B, 1, T, D/2)."""
    x1, x2 = x.float().chunk(2, dim=-1)
    out = torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    return out.type_as(x)


class LayerCache:
    """Keys and values seen so far by one attention layer, preallocated for the whole generation."""

    def __init__(self, batch: int, heads: int, capacity: int, head_dim: int, like: Tensor) -> None:
        shape = (batch, heads, capacity, head_dim)
        self.k = torch.zeros(shape, dtype=like.dtype, device=like.device)
        self.v = torch.zeros(shape, dtype=like.dtype, device=like.device)
        self.length = 0
        self.col: Tensor | None = None
        """A `StepGraph`'s cache: the column a step writes, as a device tensor (a captured
        graph cannot take a Python number that changes); its owner keeps `length`."""

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Write the new keys and values after the cached ones; the columns written so far."""
        end = self.length + k.shape[2]
        self.k[:, :, self.length : end] = k
        self.v[:, :, self.length : end] = v
        self.length = end
        return self.k[:, :, :end], self.v[:, :, :end]

    def append_one(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Write one column (a decoding step); the whole buffers, whose shape never changes."""
        if self.col is not None:
            self.k.index_copy_(2, self.col, k)
            self.v.index_copy_(2, self.col, v)
        else:
            self.k[:, :, self.length] = k[:, :, 0]
            self.v[:, :, self.length] = v[:, :, 0]
            self.length += 1
        return self.k, self.v

    def copy(self) -> LayerCache:
        """A plain cache (no graph's column) holding copies of these keys and values."""
        twin = LayerCache.__new__(LayerCache)
        twin.k, twin.v, twin.length, twin.col = self.k.clone(), self.v.clone(), self.length, None
        return twin

    def grow(self, extra: int) -> None:
        """Make room for `extra` more columns (a cache kept across calls can outgrow its plan)."""
        b, h, capacity, d = self.k.shape
        k = self.k.new_zeros(b, h, capacity + extra, d)
        v = self.v.new_zeros(b, h, capacity + extra, d)
        k[:, :, : self.length], v[:, :, : self.length] = (
            self.k[:, :, : self.length],
            self.v[:, :, : self.length],
        )
        self.k, self.v = k, v


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)

    def forward(
        self,
        x: Tensor,
        cos: Tensor,
        sin: Tensor,
        mask: Tensor | None,
        cache: LayerCache | None,
        step: bool = False,
    ) -> Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if step and cache is not None and mask is not None:  # one byte after the cached ones
            k, v = cache.append_one(k, v)
            y = decode_attention(q, k, v, mask)
        else:
            if cache is not None:
                k, v = cache.append(k, v)
            if mask is None:  # training: plain causal attention, the flash-attention fast path
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.up = nn.Linear(cfg.d_model, cfg.mlp_ratio * cfg.d_model, bias=False)
        self.down = nn.Linear(cfg.mlp_ratio * cfg.d_model, cfg.d_model, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.down(F.gelu(self.up(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.norm1 = RMSNorm(cfg.d_model)
        self.attn = Attention(cfg)
        self.norm2 = RMSNorm(cfg.d_model)
        self.mlp = MLP(cfg)

    def forward(
        self,
        x: Tensor,
        cos: Tensor,
        sin: Tensor,
        mask: Tensor | None,
        cache: LayerCache | None,
        step: bool = False,
    ) -> Tensor:
        x = x + self.attn(self.norm1(x), cos, sin, mask, cache, step)
        return x + self.mlp(self.norm2(x))


# ----------------------------------------------------------------------------------------------
# The model


class GPT(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.norm = RMSNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.apply(self._init)
        # GPT-2 style: shrink the residual projections so the residual stream does not grow with
        # depth at initialisation.
        for name, p in self.named_parameters():
            if name.endswith(("attn.proj.weight", "mlp.down.weight")):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init(module: nn.Module) -> None:
        if isinstance(module, nn.Linear | nn.Embedding):
            nn.init.normal_(module.weight, std=0.02)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def rope(self, length: int, device: torch.device | str) -> tuple[Tensor, Tensor]:
        """The rotary tables of positions 0..length-1, (1, length, head_dim/2) each: what
        training passes to `forward` as `rope`, made once outside any compiled graph."""
        positions = torch.arange(length, device=device)[None]
        return rope_tables(positions, self.cfg.d_model // self.cfg.n_head, self.cfg.rope_base)

    def forward(
        self,
        idx: Tensor,
        positions: Tensor | None = None,
        mask: Tensor | None = None,
        caches: list[LayerCache] | None = None,
        step: bool = False,
        last_only: bool = False,
        rope: tuple[Tensor, Tensor] | None = None,
    ) -> Tensor:
        """Logits (B, T, 256). Training passes only `idx`; inference adds positions/mask/caches.

        `step`: `idx` is one byte per row after the cached ones and `mask` (B, 1, 1, capacity)
        marks the cache columns it may see (`decode_attention`). `last_only`: the logits of the
        last position only (B, 1, 256), the head skipped elsewhere. `rope`: the tables of
        `GPT.rope` for positions 0..T-1, made beforehand (training: inside a compiled model,
        torch.compile fused the cosines and sines into the kernels that rotate queries and keys
        and recomputed them for every element, forward and backward: on an H100, 10 ms of the
        old default preset's 34-ms step)."""
        if rope is None and positions is None:
            rope = self.rope(idx.shape[1], idx.device)
        elif rope is None:
            rope = rope_tables(positions, self.cfg.d_model // self.cfg.n_head, self.cfg.rope_base)
        cos, sin = rope[0][:, None], rope[1][:, None]  # broadcast over heads
        x = self.embed(idx)
        if self.autocast_residual and torch.is_autocast_enabled(x.device.type):
            x = x.to(torch.get_autocast_dtype(x.device.type))  # the residual stream in bf16
        for i, block in enumerate(self.blocks):
            x = block(x, cos, sin, mask, caches[i] if caches is not None else None, step)
        if last_only:
            x = x[:, -1:]
        return self.head(self.norm(x)).float()

    # ------------------------------------------------------------------------------------------
    # Inference: batched, left-padded, with a KV cache

    def _pad_left(self, rows: list[bytes]) -> tuple[Tensor, Tensor, Tensor]:
        """(ids, positions, valid) for rows padded on the left to the longest one (on a GPU, to
        the next multiple of `WIDTH_BUCKET`: pads are invisible, and shapes repeat)."""
        device = self.head.weight.device
        width = max(len(r) for r in rows)
        if device.type == "cuda":
            width = -(-width // WIDTH_BUCKET) * WIDTH_BUCKET
        ids = torch.zeros(len(rows), width, dtype=torch.long)
        valid = torch.zeros(len(rows), width, dtype=torch.bool)
        for i, r in enumerate(rows):
            if r:
                ids[i, width - len(r) :] = torch.frombuffer(bytearray(r), dtype=torch.uint8)
            valid[i, width - len(r) :] = True
        pad = (~valid).sum(1, keepdim=True)
        positions = (torch.arange(width)[None] - pad).clamp(min=0)
        return ids.to(device), positions.to(device), valid.to(device)

    @staticmethod
    def _prefill_mask(valid: Tensor) -> Tensor:
        """Causal mask that hides pad keys; a pad query sees itself so no row is all -inf."""
        T = valid.shape[1]
        causal = torch.ones(T, T, dtype=torch.bool, device=valid.device).tril()
        eye = torch.eye(T, dtype=torch.bool, device=valid.device)
        return (causal & (valid[:, None, :] | eye))[:, None]  # (B, 1, T, T)

    @staticmethod
    def _widen(valid: Tensor, capacity: int) -> Tensor:
        """`valid` (B, S) with False columns up to `capacity`: the mask of a cache's buffers."""
        extra = capacity - valid.shape[1]
        return torch.cat([valid, valid.new_zeros(len(valid), extra)], dim=1) if extra else valid

    def _pass_size(self) -> int:
        """Bytes one decoding pass writes: a sixteenth of the block (at least 16, at most half
        of it), plus one. Longer passes cut more of a long prompt; shorter ones prefill more
        often (an exam asks 16 to 64 bytes: one pass on the default 1,024-byte block)."""
        block = self.cfg.block_size
        writes = min(max(16, block // 16), block // 2)
        return min(writes + 1, block)

    def _new_caches(self, batch: int, capacity: int) -> list[LayerCache]:
        """One empty KV cache per layer, `capacity` columns for `batch` rows."""
        head_dim = self.cfg.d_model // self.cfg.n_head
        like = self.head.weight
        return [LayerCache(batch, self.cfg.n_head, capacity, head_dim, like) for _ in self.blocks]

    def _prefill(
        self, ids: Tensor, positions: Tensor, valid: Tensor, caches: list[LayerCache]
    ) -> tuple[Tensor, Tensor]:
        """Run the padded rows into empty `caches`; the last position's logits (B, 256) and
        `valid` widened to the caches' capacity (what `_step` takes)."""
        logits = self(ids, positions, self._prefill_mask(valid), caches, last_only=True)[:, -1]
        return logits, self._widen(valid, caches[0].k.shape[2])

    def _step(
        self, ids: Tensor, last: Tensor, valid: Tensor, caches: list[LayerCache]
    ) -> tuple[Tensor, Tensor, Tensor]:
        """One decoding step: byte `ids[i]` (B,) after row i's cached bytes, whose last
        position is `last[i]`. `valid` (B, capacity) marks the cache columns that hold real
        (non-pad) bytes; the new byte's column is marked in place. Returns the logits (B, 256),
        the new last positions and `valid`."""
        valid[:, caches[0].length] = True
        positions = last[:, None] + 1
        mask = valid[:, None, None, :]  # (B, 1, 1, capacity): the new byte sees all real bytes
        logits = self(ids[:, None], positions, mask, caches, step=True)[:, -1]
        return logits, positions[:, 0], valid

    autocast_residual = False
    """Training under autocast: carry the residual stream in the autocast dtype (bf16) rather
    than float32, halving what every norm, residual add and cast reads and writes (train.py's
    `--set bf16_residual=true`). On a GPU inference runs wholly in bf16 anyway."""

    use_graphs: bool | None = None
    """Decode with `StepGraph`s: None on a GPU only, False never (the eager path, e.g. to
    compare), True also on a CPU (the same buffers and steps, run without capture: tests)."""

    def _step_graph(self, owner: str, batch: int, capacity: int) -> StepGraph | None:
        """The captured decoding step for `owner` ("generate", "logprobs": each its own, so one
        never overwrites the other's caches) at this shape, made on first use; None where
        graphs are off or cannot be made (then decoding is eager, as on a CPU)."""
        device = self.head.weight.device
        if self.use_graphs is False or (device.type != "cuda" and not self.use_graphs):
            return None
        graphs: dict[tuple[str, int, int], StepGraph] = self.__dict__.setdefault("_graphs", {})
        key = (owner, batch, capacity)
        if key not in graphs:
            try:
                graphs[key] = StepGraph(self, batch, capacity)
            except Exception as exc:  # e.g. a driver that cannot capture: decode eagerly
                print(f"CUDA graphs off ({type(exc).__name__}: {exc})"[:300], file=sys.stderr)
                self.use_graphs = False
                graphs.clear()
                return None
            while len(graphs) > StepGraph.KEEP:
                graphs.pop(next(iter(graphs)))
        graph = graphs.pop(key)
        graphs[key] = graph  # the most recently used last
        graph.reset()
        return graph

    @torch.no_grad()
    def generate(
        self, prompts: list[bytes], lengths: list[int], use_cache: bool = True
    ) -> list[bytes]:
        """Greedy continuation of each prompt by exactly `lengths[i]` bytes.

        Decoding goes in passes of `_pass_size()` bytes. Each pass starts from every row's text
        so far (prompt + bytes written) cut to its last `block_size - _pass_size() + 1` bytes,
        so a pass never reads past the trained context. The passes, the cut and the caches'
        shapes depend on the texts alone, never on how many bytes are asked: the first n bytes
        written are the same whether n or more are asked for (the grader asks every question
        of an exam for one length, its longest answer's)."""
        if not prompts:
            return []
        steps = max(lengths)
        if steps == 0:
            return [b"" for _ in prompts]
        size = self._pass_size()
        keep = self.cfg.block_size - size + 1
        texts = [bytearray(p) for p in prompts]
        written = 0
        with inference_attention(self.head.weight.device):
            while written < steps:
                rows = [bytes(t[-keep:]) or b"\n" for t in texts]  # empty: a doc boundary
                count = min(size, steps - written)
                out = self._decode_pass(rows, size, count, use_cache)
                for text, new in zip(texts, out.to(torch.uint8).cpu().numpy(), strict=True):
                    text += new.tobytes()
                written += count
        cut = zip(texts, prompts, lengths, strict=True)
        return [bytes(text[len(p) : len(p) + n]) for text, p, n in cut]

    def _decode_pass(self, rows: list[bytes], size: int, count: int, use_cache: bool) -> Tensor:
        """(len(rows), count) greedy bytes after `rows`, from caches with room for `size`."""
        ids, positions, valid = self._pad_left(rows)
        out = torch.zeros(len(rows), count, dtype=torch.long, device=ids.device)
        if not use_cache:  # reference path: recompute everything each step (used by the tests)
            for t in range(count):
                logits = self(ids, positions, self._prefill_mask(valid))[:, -1]
                nxt = logits.argmax(-1)
                out[:, t] = nxt
                ids = torch.cat([ids, nxt[:, None]], dim=1)
                valid = torch.cat([valid, valid.new_ones(len(rows), 1)], dim=1)
                positions = torch.cat([positions, positions[:, -1:] + 1], dim=1)
            return out
        capacity = ids.shape[1] + size
        graph = self._step_graph("generate", len(rows), capacity) if count > 1 else None
        caches = graph.caches if graph else self._new_caches(len(rows), capacity)
        logits, valid = self._prefill(ids, positions, valid, caches)
        last = positions[:, -1]
        if graph:
            graph.start(valid, last)
        for t in range(count):
            nxt = logits.argmax(-1)
            out[:, t] = nxt
            if t == count - 1:
                break
            if graph:
                logits = graph.step(nxt)
            else:
                logits, last, valid = self._step(nxt, last, valid, caches)
        return out

    @torch.no_grad()
    def next_byte_logprobs(
        self, contexts: list[bytes], chunk: int = 64, cache: Any = None
    ) -> Tensor:
        """(len(contexts), 256) log-probabilities of the byte that follows each context.

        Contexts that are prefixes of a longer one (prompt, prompt + a, prompt + ab, ...) are
        read off that longer row's logits instead of being run again: causal attention makes
        the two identical.

        With a `cache` (inference.py's `ContextCache`), the keys and values of this call's
        contexts are kept for the next call: when every context of that call is one of these
        plus one byte (how the grader asks for an answer, byte by byte), it costs one decoding
        step instead of a whole forward pass (see `ContextCache.logprobs`)."""
        rows = [self.window(c) for c in contexts]
        with inference_attention(self.head.weight.device):
            if cache is not None:
                distinct = list(dict.fromkeys(rows))
                if len(distinct) <= chunk:
                    logprobs = cache.logprobs(self, distinct)
                    at = {r: i for i, r in enumerate(distinct)}
                    return logprobs[[at[r] for r in rows]]
                cache.clear()
            return self._whole_logprobs(rows, chunk)

    def window(self, context: bytes) -> bytes:
        """The bytes of `context` that the model reads: all of them up to the block size; past
        it, a suffix whose start moves on in strides of an eighth of the block (so the window
        holds between 7/8 of the block and all of it). A context grown by one byte then mostly
        keeps its window's start, and a cache steps on; a window sliding on by every byte could
        never be stepped, and a grading of long prompts would run a whole pass per byte."""
        over = len(context) - self.cfg.block_size
        if over <= 0:
            return context or b"\n"
        stride = max(1, self.cfg.block_size // 8)
        return context[-(-over // stride) * stride :]

    def _whole_logprobs(self, rows: list[bytes], chunk: int) -> Tensor:
        """`next_byte_logprobs` without a cache: whole passes over the longest distinct rows."""
        kept: list[bytes] = []
        where: list[tuple[int, int]] = [(0, 0)] * len(rows)  # (kept row, position in it)
        for i in sorted(range(len(rows)), key=lambda i: -len(rows[i])):
            home = next((j for j, r in enumerate(kept) if r.startswith(rows[i])), None)
            if home is None:
                kept.append(rows[i])
                home = len(kept) - 1
            where[i] = (home, len(rows[i]) - 1)
        out = torch.zeros(len(rows), 256)
        for start in range(0, len(kept), chunk):
            batch = kept[start : start + chunk]
            ids, positions, valid = self._pad_left(batch)
            logprobs = F.log_softmax(self(ids, positions, self._prefill_mask(valid)).float(), -1)
            width = ids.shape[1]
            mine = [i for i, (row, _) in enumerate(where) if start <= row < start + chunk]
            if not mine:
                continue
            row_at = [where[i][0] - start for i in mine]
            col_at = [width - len(kept[where[i][0]]) + where[i][1] for i in mine]
            out[mine] = logprobs[row_at, col_at].cpu()  # one transfer per chunk
        return out


class StepGraph:
    """One decoding step captured as a CUDA graph for a fixed (batch, capacity): the hundreds of
    small kernels of a step (every layer's norms, projections, rotations, attention, MLP) replay
    as one launch. On a GPU a small model's step is bound by launching those kernels one by one
    from Python, not by the work in them: a graph makes the step what the work costs.

    The graph owns its buffers (caches, the mask of real columns, the step's bytes and last
    positions, the column written): a prefill writes into `caches`, `start` copies the mask and
    positions in, each `step(ids)` replays and returns the logits (a buffer of the graph's,
    overwritten by the next replay).
    """

    KEEP = 8
    """Graphs a model keeps per owner and shape (each holds its own caches)."""

    def __init__(self, model: GPT, batch: int, capacity: int) -> None:
        device = model.head.weight.device
        self.model = model
        self.caches = model._new_caches(batch, capacity)
        self.col = torch.zeros(1, dtype=torch.long, device=device)
        for cache in self.caches:
            cache.col = self.col
        self.valid = torch.zeros(batch, capacity, dtype=torch.bool, device=device)
        self.ids = torch.zeros(batch, dtype=torch.long, device=device)
        self.last = torch.zeros(batch, dtype=torch.long, device=device)
        self.graph: torch.cuda.CUDAGraph | None = None
        if device.type != "cuda":  # a test's CPU stand-in: each step runs the body eagerly
            self.logits = torch.zeros(batch, 256)
            return
        # Warm up on a side stream (lazy initialisations happen outside the capture), capture.
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(2):
                self._body()
        torch.cuda.current_stream(device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.logits = self._body()

    def _body(self) -> Tensor:
        self.valid.index_fill_(1, self.col, True)
        positions = self.last[:, None] + 1
        mask = self.valid[:, None, None, :]
        logits = self.model(self.ids[:, None], positions, mask, self.caches, step=True)[:, -1]
        self.last.copy_(positions[:, 0])
        return logits

    @property
    def capacity(self) -> int:
        return int(self.valid.shape[1])

    def reset(self) -> None:
        """Empty caches, for a new prefill (what the last use left is overwritten or masked)."""
        for cache in self.caches:
            cache.length = 0

    def start(self, valid: Tensor, last: Tensor) -> None:
        """After a prefill into `caches`: its mask of real columns (as wide as the caches) and
        each row's last position."""
        self.valid.copy_(valid)
        self.last.copy_(last)

    def step(self, ids: Tensor) -> Tensor:
        """Byte `ids[i]` after row i's cached bytes: the logits (batch, 256)."""
        length = self.caches[0].length
        self.ids.copy_(ids)
        self.col.fill_(length)
        if self.graph is None:
            self.logits = self._body()
        else:
            self.graph.replay()
        for cache in self.caches:
            cache.length = length + 1
        return self.logits
