"""The bundle's entry point (DESIGN §4): `load(bundle_dir, device)` returns a model with `generate`
and `next_byte_logprobs`. The grader imports this file inside its sandbox.

A bundle written by the starter's export holds: this file, `model.py` (the architecture),
`config.json` (the model config) and `weights.pt` (int8 weights with one float16 scale per row,
small tensors in float16). Everything here imports only torch, numpy and the standard library.
If you change the architecture, keep `load` and the two methods: the grader calls nothing else.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import torch

WEIGHTS_FORMAT = "int8-per-row-v1"


def _import_sibling(bundle_dir: Path, name: str) -> ModuleType:
    """Import `name`.py from the bundle folder without touching sys.path."""
    spec = importlib.util.spec_from_file_location(f"bundle_{name}", bundle_dir / f"{name}.py")
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {name}.py from {bundle_dir}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


def dequantize(stored: dict[str, object]) -> dict[str, torch.Tensor]:
    """Turn the stored tensors back into a float32 state dict."""
    state = {}
    for name, value in stored.items():
        if isinstance(value, dict):  # int8 rows with one scale each
            q, scale = value["q"], value["scale"]
            state[name] = q.float() * scale.float()[:, None]
        else:
            state[name] = value.float()  # type: ignore[union-attr]
    return state


class ContextCache:
    """What `next_byte_logprobs` keeps between calls: the last call's contexts (one cache row
    each, left-padded as in a batch) with their keys, values, the mask of their real columns
    (as wide as the buffers) and last positions. Its caches are the model's (`model.LayerCache`,
    or a `model.StepGraph`'s on a GPU)."""

    ROOM = 64  # columns a cache grows by when a step would overflow it

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.rows: dict[bytes, int] = {}
        self.graph: Any = None  # model.StepGraph
        """Where `layers` are a captured step's (on a GPU): stepped in place, rows never move."""
        self.layers: list[Any] = []  # model.LayerCache
        self.valid = torch.zeros(0, 0, dtype=torch.bool)
        self.last = torch.zeros(0, dtype=torch.long)

    def in_place(self, parents: list[int]) -> bool:
        """Whether a step can leave every row where it is: each parent extended once, and a
        free column in the caches."""
        free = self.graph is not None and self.layers[0].length < self.graph.capacity
        return free and len(set(parents)) == len(parents)

    def detach(self) -> None:
        """Take the graph's buffers over as plain ones (before rows move or the caches grow)."""
        graph, self.graph = self.graph, None
        if graph is None:
            return
        copies = [layer.copy() for layer in graph.caches]
        self.layers, self.valid, self.last = copies, graph.valid.clone(), graph.last.clone()

    def parents(self, rows: list[bytes]) -> list[int | None]:
        """For each row, the cache row it extends by exactly one byte, or None (an orphan: a
        new row, or a long context whose window moved on)."""
        return [self.rows.get(r[:-1]) for r in rows]

    def free_rows(self, parents: list[int | None]) -> list[int]:
        """The graph's rows that no parent holds (rows whose questions ended, or orphans')."""
        taken = {p for p in parents if p is not None}
        return [i for i in range(len(self.graph.ids) if self.graph else 0) if i not in taken]

    def seated(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The mask of real columns and the last positions that the next step reads: the
        graph's own buffers on a GPU, else this cache's."""
        if self.graph is not None:
            return self.graph.valid, self.graph.last
        return self.valid, self.last

    # -- a call of next_byte_logprobs: step on, seat the orphans, or start afresh ---------------
    # These drive the model's own inference pieces (`_pad_left`, `_prefill`, `_step`,
    # `_new_caches`, `_step_graph` in model.py, the bundle's other file).

    def logprobs(self, model: Any, rows: list[bytes]) -> torch.Tensor:
        """Log-probs after each of `rows` (distinct, as `model.window` reads them), stepping
        this cache on by a byte where it can.

        Rows that extend no cache row (orphans: a long context whose window moved on) are run
        alone, a small prefill, and seated in a row of the cache; more than half of them, or one
        longer than the cache, and the whole batch runs again."""
        parents = self.parents(rows)
        orphans = [i for i, p in enumerate(parents) if p is None]
        length = self.layers[0].length if self.layers else 0
        seatable = len(orphans) <= len(rows) // 2 and all(len(rows[i]) <= length for i in orphans)
        if orphans and not seatable:
            return self._fresh(model, rows)
        device = model.head.weight.device
        graph, slots = self.graph, None
        if graph is not None:  # an orphan takes a graph row that no parent holds
            free = iter(self.free_rows(parents))
            seats = [p if p is not None else next(free, None) for p in parents]
            if None not in seats and self.in_place(seats):
                slots = seats
        if slots is not None:
            # Every row extends a different cache row, with room to spare: step every cache row
            # where it is (a row no longer asked for steps on a byte nobody reads) and read the
            # asked rows' logits: the shapes stay, and so does the graph.
            every = [0] * len(graph.ids)
            for slot, row in zip(slots, rows, strict=True):
                every[slot] = row[-1]
            ids = torch.tensor(every, dtype=torch.long, device=device)
            logits = graph.step(ids)[slots]  # a copy: the graph's buffer is its own
        else:  # one step: each row's last byte, after its parent's keys and values
            self.detach()
            slots = list(range(len(rows)))
            self.keep([p if p is not None else 0 for p in parents])  # orphans: a stand-in
            ids = torch.tensor([r[-1] for r in rows], dtype=torch.long, device=device)
            logits, self.last, self.valid = model._step(ids, self.last, self.valid, self.layers)
        if orphans:
            alone = [rows[i] for i in orphans]
            logits[orphans] = self._seat(model, alone, [slots[i] for i in orphans])
        self.rows = {r: slot for r, slot in zip(rows, slots, strict=True)}
        return torch.log_softmax(logits.float(), -1).cpu()

    def _fresh(self, model: Any, rows: list[bytes]) -> torch.Tensor:
        """A whole pass over `rows`, kept in a fresh cache (or graph) with room to step on."""
        ids, positions, valid = model._pad_left(rows)
        capacity = ids.shape[1] + self.ROOM
        self.graph = graph = model._step_graph("logprobs", len(rows), capacity)
        self.layers = graph.caches if graph else model._new_caches(len(rows), capacity)
        logits, self.valid = model._prefill(ids, positions, valid, self.layers)
        self.last = positions[:, -1]
        if graph:
            graph.start(self.valid, self.last)
        self.rows = {r: i for i, r in enumerate(rows)}
        return torch.log_softmax(logits.float(), -1).cpu()

    def _seat(self, model: Any, rows: list[bytes], slots: list[int]) -> torch.Tensor:
        """Run `rows` alone and write each one's keys and values into cache row `slots[i]`,
        ending at the last written column, its other columns masked out (a row's positions
        start at its first byte, so where it sits does not matter); their logits. Every row is
        at most as long as the written columns."""
        ids, positions, valid = model._pad_left(rows)
        width, end = ids.shape[1], self.layers[0].length
        temp = model._new_caches(len(rows), width)
        logits, _ = model._prefill(ids, positions, valid, temp)
        keep = min(width, end)  # the columns kept: every real byte, pads on the left cut
        index = torch.tensor(slots, device=ids.device)
        seen, last = self.seated()
        seen[index] = False
        seen[index, end - keep : end] = valid[:, width - keep :]
        last[index] = positions[:, -1]
        for layer, alone in zip(self.layers, temp, strict=True):
            layer.k[index, :, end - keep : end] = alone.k[:, :, width - keep :]
            layer.v[index, :, end - keep : end] = alone.v[:, :, width - keep :]
        return logits

    def keep(self, parents: list[int]) -> None:
        """Reorder (and drop) cache rows to `parents`, with room for one more column."""
        if parents != list(range(len(self.rows))):  # rows ended or moved: gather them
            index = torch.tensor(parents, device=self.valid.device)
            self.valid, self.last = self.valid[index], self.last[index]
            for layer in self.layers:
                layer.k, layer.v = layer.k[index], layer.v[index]
        if self.layers and self.layers[0].length == self.layers[0].k.shape[2]:
            for layer in self.layers:
                layer.grow(self.ROOM)
            room = self.valid.new_zeros(len(self.valid), self.ROOM)
            self.valid = torch.cat([self.valid, room], dim=1)


class BundleModel:
    """What the grader talks to: batched greedy generation and next-byte log-probabilities."""

    def __init__(self, gpt: torch.nn.Module, device: str, cache: object) -> None:
        self.gpt = gpt
        self.device = device
        # The grader asks for an answer's log-probs byte by byte, each request the last one's
        # contexts plus a byte: the cache turns each such request into one decoding step.
        self.cache = cache

    def generate(self, prompts: list[bytes], lengths: list[int]) -> list[bytes]:
        return self.gpt.generate(list(prompts), list(lengths))

    def next_byte_logprobs(self, contexts: list[bytes]) -> np.ndarray:
        return self.gpt.next_byte_logprobs(list(contexts), cache=self.cache).float().numpy()


def load(bundle_dir: str, device: str = "cpu") -> BundleModel:
    root = Path(bundle_dir)
    model_mod = _import_sibling(root, "model")
    cfg = model_mod.ModelConfig(**json.loads((root / "config.json").read_text()))
    saved = torch.load(root / "weights.pt", map_location="cpu", weights_only=True)
    if saved.get("format") != WEIGHTS_FORMAT:
        raise ValueError(f"weights.pt: unknown format {saved.get('format')!r}")
    gpt = model_mod.GPT(cfg)
    gpt.load_state_dict(dequantize(saved["tensors"]))
    gpt.eval()
    if device.startswith("cuda"):
        gpt = gpt.to(device=device, dtype=torch.bfloat16)  # fast path on a GPU
    return BundleModel(gpt, device, ContextCache())
