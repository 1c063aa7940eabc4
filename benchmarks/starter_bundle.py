"""The starter's modules and a freshly initialised starter bundle, for the benchmark scripts.

The starter (`toolkit/starter/`) is a folder of scripts, not a package: its files import one
another by bare name, so its folder goes on `sys.path` and each file is loaded from its path.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[1]
STARTER = REPO / "toolkit" / "starter"


def import_file(path: Path, name: str) -> ModuleType:
    """The module in `path`, registered as `name` (dataclasses look their module up there)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def starter_module(name: str) -> ModuleType:
    """`toolkit/starter/<name>.py` (train, export, model, ...), loaded once per process."""
    if str(STARTER) not in sys.path:
        sys.path.insert(0, str(STARTER))
    return sys.modules.get(f"bench_starter_{name}") or import_file(
        STARTER / f"{name}.py", f"bench_starter_{name}"
    )


def variant(spec: str) -> Any:
    """The TrainConfig of a variant: a preset, optionally with train.py settings joined by "+"
    (`default+n_head=4`: what `train.py --preset default --set n_head=4` trains). Raises
    ValueError with train.py's one-line reason for a bad one."""
    preset, *settings = spec.split("+")
    return starter_module("train").configure(preset, settings)


def fresh_bundle(out: Path, preset: str, seed: int = 0) -> Any:
    """Write the starter bundle of a freshly initialised `preset` model to `out`; the model.
    `preset` may carry train.py settings joined by "+" (`tiny+block_size=1024`).

    Speed does not depend on what the weights learned: generation always produces exactly the
    length asked, and a forward pass costs the same whatever the weights.
    """
    import torch

    train, export = starter_module("train"), starter_module("export")
    torch.manual_seed(seed)
    cfg = variant(preset)
    model = train.GPT(cfg.model)
    export.write_bundle(model, out, bits=cfg.export_bits)
    return model
