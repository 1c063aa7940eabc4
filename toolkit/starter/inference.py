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
