"""The starter model: shapes, KV-cache generation, log-probs, and the export round trip."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from export import import_bundle, quantize_state, write_bundle
from model import GPT, ModelConfig


@pytest.fixture(scope="module")
def model() -> GPT:
    torch.manual_seed(0)
    gpt = GPT(ModelConfig(block_size=64, n_layer=2, n_head=2, d_model=32))
    # Random init makes near-uniform logits; sharpen them so greedy choices are not near-ties.
    with torch.no_grad():
        gpt.head.weight.mul_(50)
    return gpt.eval()


def test_forward_shapes(model: GPT) -> None:
    idx = torch.randint(0, 256, (3, 17))
    assert model(idx).shape == (3, 17, 256)
    assert model.num_params() > 0


PROMPTS = [b"The quick brown fox", b"a", b"", b"x" * 200, b"\x00\xff binary \xfe"]
LENGTHS = [5, 9, 3, 4, 1]


def test_kv_cache_generation_equals_recomputation(model: GPT) -> None:
    cached = model.generate(PROMPTS, LENGTHS)
    recomputed = model.generate(PROMPTS, LENGTHS, use_cache=False)
    assert cached == recomputed
    assert [len(c) for c in cached] == LENGTHS


def test_batched_generation_equals_one_by_one(model: GPT) -> None:
    batched = model.generate(PROMPTS, LENGTHS)
    alone = [model.generate([p], [n])[0] for p, n in zip(PROMPTS, LENGTHS, strict=True)]
    assert batched == alone


def test_next_byte_logprobs_match_the_forward_pass(model: GPT) -> None:
    contexts = [b"hello", b"hello w", b"q"]
    logprobs = model.next_byte_logprobs(contexts)
    assert logprobs.shape == (3, 256)
    assert torch.allclose(logprobs.exp().sum(-1), torch.ones(3), atol=1e-4)
    alone = torch.log_softmax(model(torch.tensor([list(b"hello w")]))[0, -1], -1)
    assert torch.allclose(logprobs[1], alone, atol=1e-4)
    # Greedy generation agrees with the argmax of the log-probs.
    assert model.generate([b"hello w"], [1])[0] == bytes([int(logprobs[1].argmax())])


def test_logprobs_of_prefix_contexts_equal_separate_runs(model: GPT) -> None:
    answer = b"prompt: the answer"
    contexts = [answer[:k] for k in range(8, len(answer))] + [b"other", b"oth"]
    shared = model.next_byte_logprobs(contexts)
    alone = torch.cat([model.next_byte_logprobs([c]) for c in contexts])
    assert torch.allclose(shared, alone, atol=1e-5)


def test_int8_quantization_is_close(model: GPT) -> None:
    stored = quantize_state(model)
    q = stored["blocks.0.mlp.up.weight"]
    assert isinstance(q, dict) and q["q"].dtype == torch.int8
    w = model.state_dict()["blocks.0.mlp.up.weight"]
    err = (q["q"].float() * q["scale"].float()[:, None] - w).abs().max()
    assert err <= w.abs().max() / 127


def test_export_round_trip(model: GPT, tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    write_bundle(model, out)
    assert sorted(p.name for p in out.iterdir()) == [
        "config.json",
        "inference.py",
        "model.py",
        "weights.pt",
    ]
    assert json.loads((out / "config.json").read_text())["d_model"] == 32
    bundle = import_bundle(out).load(str(out), "cpu")
    outputs = bundle.generate(PROMPTS, LENGTHS)
    assert [len(o) for o in outputs] == LENGTHS and all(isinstance(o, bytes) for o in outputs)
    logprobs = bundle.next_byte_logprobs([b"abc", b"abcd"])
    assert isinstance(logprobs, np.ndarray) and logprobs.shape == (2, 256)
    # Same distribution as the float model, up to int8 rounding.
    reference = model.next_byte_logprobs([b"abc", b"abcd"]).numpy()
    assert np.abs(np.exp(logprobs) - np.exp(reference)).max() < 0.05


def test_train_py_refuses_a_missing_data_folder_clearly(tmp_path: Path) -> None:
    import subprocess
    import sys

    starter = Path(__file__).resolve().parents[2] / "toolkit" / "starter"
    done = subprocess.run(
        [
            sys.executable,
            str(starter / "train.py"),
            "--data",
            str(tmp_path / "nothing"),
            "--out",
            str(tmp_path / "b"),
            "--budget-s",
            "30",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1
    assert "train.bin not found" in done.stderr and "--data" in done.stderr
    assert not (tmp_path / "b").exists()
