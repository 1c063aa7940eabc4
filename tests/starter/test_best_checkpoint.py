"""The starter exports the weights of its best validation, not those of its last step."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from model import GPT, ModelConfig
from train import BestWeights

STARTER = Path(__file__).resolve().parents[2] / "toolkit" / "starter"


def _model(seed: int) -> GPT:
    torch.manual_seed(seed)
    return GPT(ModelConfig(block_size=16, n_layer=1, n_head=2, d_model=16))


def test_best_weights_keeps_the_lowest_bpb_and_restores_it() -> None:
    model = _model(0)
    best = BestWeights()
    assert best.offer(4.0, 0, model)
    kept = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():  # training moves on: the kept copy must not follow
        for p in model.parameters():
            p.add_(1.0)
    assert not best.offer(4.5, 10, model)
    assert not best.offer(float("nan"), 15, model)
    assert best.offer(3.0, 20, model)
    at_20 = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(0.0)
    assert not best.offer(3.0, 30, model)  # a tie keeps the earlier weights
    best.restore(model)
    assert (best.bpb, best.step) == (3.0, 20)
    for name, value in model.state_dict().items():
        assert torch.equal(value, at_20[name]) and not torch.equal(value, kept[name])


def _overfitting_data(folder: Path) -> None:
    """Training text of 30 made-up words, which a few dozen steps memorise, and validation text
    of 200 other words: validation improves first (letters, spaces), then gets much worse."""
    rng = np.random.default_rng(0)
    words = [
        "".join(chr(c) for c in rng.integers(97, 123, size=rng.integers(3, 8))) for _ in range(400)
    ]
    train = " ".join(words[i] for i in rng.integers(0, 30, size=200)).encode()
    val = " ".join(words[i] for i in rng.integers(200, 400, size=4000)).encode()
    folder.mkdir()
    (folder / "train.bin").write_bytes(train)
    (folder / "val.bin").write_bytes(val)


@pytest.mark.slow
def test_an_overfitting_run_exports_its_best_validation(tmp_path: Path) -> None:
    _overfitting_data(tmp_path / "data")
    done = subprocess.run(
        [
            sys.executable,
            str(STARTER / "train.py"),
            "--data",
            str(tmp_path / "data"),
            "--out",
            str(tmp_path / "b"),
            "--budget-s",
            "120",  # a bound only: the steps below end it (486 steps took 20 s on 2 idle cores)
            "--max-steps",
            "100",  # 72 steps already overfit by 1.2 bpb; the same steps however busy the box
            "--device",
            "cpu",
            "--preset",
            "micro",
            "--eval-every-s",
            "0",  # after every step: where the minimum falls does not depend on the machine
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((tmp_path / "b" / "train_summary.json").read_text())
    assert 0 < summary["best_step"] < summary["steps"], done.stdout
    assert summary["best_val_bpb"] < summary["last_val_bpb"] - 0.5, done.stdout
    # What was exported is the best model: its own val bpb (int8 weights, reloaded from the
    # bundle, on every validation window) is the best one, not the last step's.
    assert summary["exported_val_bpb"] == pytest.approx(summary["best_val_bpb"], abs=0.03)
    assert summary["exported_val_bpb"] < summary["last_val_bpb"] - 0.5
