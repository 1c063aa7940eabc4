"""The starter model: shapes, KV-cache generation, log-probs, and the export round trip."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from export import import_bundle, quantize_state, write_bundle
from inference import ContextCache
from model import GPT, ModelConfig


@pytest.fixture(scope="module", params=[False, True], ids=["eager", "step-graphs"])
def model(request: pytest.FixtureRequest) -> GPT:
    """The small model, decoding eagerly and through `StepGraph`s (on a CPU their buffers and
    steps run without capture: what a GPU's graphs replay, less the capture)."""
    torch.manual_seed(0)
    gpt = GPT(ModelConfig(block_size=64, n_layer=2, n_head=2, d_model=32))
    gpt.use_graphs = request.param
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


def test_the_first_bytes_written_do_not_depend_on_how_many_are_asked(model: GPT) -> None:
    """The grader asks every question of an exam for one length (its longest answer's): a
    model must write the same first bytes whether it is asked for those or for more. Prompts
    past the block are cut, and 150 bytes take several passes (a pass of a 64-byte block: 17)."""
    prompts = [b"y" * 63, b"The quick brown fox" * 5, b"short", b"", bytes(range(256))]
    longest = model.generate(prompts, [150] * len(prompts))
    assert [len(out) for out in longest] == [150] * len(prompts)
    for n in (1, 16, 17, 18, 40, 149):
        assert model.generate(prompts, [n] * len(prompts)) == [out[:n] for out in longest], n
    mixed = [3, 150, 17, 0, 64]
    assert model.generate(prompts, mixed) == [o[:n] for o, n in zip(longest, mixed, strict=True)]
    assert model.generate(prompts, [60] * len(prompts), use_cache=False) == [
        out[:60] for out in longest
    ]


@pytest.mark.parametrize("block", [1, 2, 5])
def test_a_tiny_block_still_writes_what_is_asked(block: int) -> None:
    torch.manual_seed(0)
    gpt = GPT(ModelConfig(block_size=block, n_layer=1, n_head=1, d_model=8)).eval()
    prompts = [b"abcdefgh", b"", b"z"]
    ten = gpt.generate(prompts, [10] * 3)
    assert [len(out) for out in ten] == [10] * 3
    assert gpt.generate(prompts, [4] * 3) == [out[:4] for out in ten]


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


def _graders_requests(prompts: list[bytes], answers: list[bytes], window: int) -> list[list[bytes]]:
    """Phase 2's requests for one batch: request k holds prompt + answer[:k] of each question
    whose answer is longer than k, cut to the last `window` bytes."""
    return [
        [(p + a[:k])[-window:] for p, a in zip(prompts, answers, strict=True) if k < len(a)]
        for k in range(max(len(a) for a in answers))
    ]


def _steps(model: GPT) -> tuple[list[int], object]:
    """Record the length of every forward pass's input (1 = a decoding step)."""
    widths: list[int] = []
    handle = model.embed.register_forward_hook(lambda _m, args, _o: widths.append(args[0].shape[1]))
    return widths, handle


def _cached_calls(gpt: GPT, requests: list[list[bytes]]) -> list[list[tuple[int, int]]]:
    """Each request asked with a cache (and checked against a whole pass without one): the
    (rows, width) of every forward pass each cached call ran."""
    cache = ContextCache()
    shapes: list[tuple[int, int]] = []
    calls: list[list[tuple[int, int]]] = []
    for contexts in requests:
        handle = gpt.embed.register_forward_hook(
            lambda _m, args, _o: shapes.append((args[0].shape[0], args[0].shape[1]))
        )
        try:
            cached = gpt.next_byte_logprobs(contexts, cache=cache)
        finally:
            handle.remove()
        calls.append(shapes[:])
        shapes.clear()
        assert torch.allclose(cached, gpt.next_byte_logprobs(contexts), atol=1e-4), contexts
    return calls


def test_cached_logprobs_equal_whole_passes_request_after_request(model: GPT) -> None:
    # Answers of different lengths (rows drop out as answers end), a repeated question, a
    # prompt longer than the block (its contexts are read through a window).
    prompts = [b"The quick brown fox", b"a", b"", b"x" * 70, b"a", b"\x00\xff binary"]
    answers = [b" jumps over", b"bc", b"hello world!", b"yz", b"bc", b"\x01"]
    calls = _cached_calls(model, _graders_requests(prompts, answers, window=1024))
    # The first call is a whole pass; then each is one step for every row (the long row, 7
    # bytes past the block of 64, steps too), and the second also runs b"h" alone: the empty
    # context was read as a newline, which b"h" does not extend.
    assert calls[0] == [(5, 62)]  # 5 distinct contexts; the 70-byte one read as its last 62
    # (Eagerly the step runs the 4 rows still asked; a graph steps its 5 rows where they are.)
    assert calls[1] in ([(4, 1), (1, 1)], [(5, 1), (1, 1)]), calls[1]
    assert all(len(call) == 1 and call[0][1] == 1 for call in calls[2:]), calls


@pytest.mark.parametrize("graphs", [False, True], ids=["eager", "step-graphs"])
def test_contexts_longer_than_the_block_step_until_their_window_moves(graphs: bool) -> None:
    """A window sliding on by every byte can never be stepped: with prompts past the block a
    grading ran a whole pass per byte (6x slower on CPU). The window's start moves in strides."""
    torch.manual_seed(2)
    gpt = GPT(ModelConfig(block_size=64, n_layer=2, n_head=2, d_model=32)).eval()
    gpt.use_graphs = graphs
    with torch.no_grad():
        gpt.head.weight.mul_(50)
    # Two long prompts whose windows move on at different bytes (90 + k and 69 + k bytes: at
    # k = 7, 15, ... and at k = 4, 12, ...); one short one.
    prompts = [bytes(range(40, 40 + 90)), b"short one", bytes(range(33, 33 + 69))]
    answers = [bytes(range(60, 100)), b"0123456789" * 4, b"abcdefghij" * 4]
    calls = _cached_calls(gpt, _graders_requests(prompts, answers, window=1024))
    # What the model reads of a long context: a suffix of 57 to 64 bytes, starting at a
    # multiple of 8; a context within the block, whole.
    for n in range(1, 200):
        window = gpt.window(bytes(n))
        assert len(window) == min(n, 64) or (n > 64 and 57 <= len(window) <= 64 and n % 8 != 0)
        assert n <= 64 or (n - len(window)) % 8 == 0
    # 40 calls: the first a whole pass of the 3 rows; every other one step of the 3 rows, and
    # when a long row's window moves on (every 8 bytes) that row alone, seated in the cache.
    assert len(calls) == 40 and calls[0] == [(3, 61)], calls[0]  # 69 bytes read as 61
    assert all(call[0][1] == 1 for call in calls[1:]), calls
    seated = [call[1:] for call in calls[1:] if len(call) > 1]
    assert all(rest == [(1, rest[0][1])] and rest[0][1] <= 64 for rest in seated), seated
    assert len(seated) >= 5  # the windows did move: the test is not vacuous


def test_cached_logprobs_step_by_one_byte_when_every_row_extends_the_last_call(
    model: GPT,
) -> None:
    prompts = [b"first prompt", b"second", b"second", b"3"]
    answers = [b"one two three", b"four", b"five!", b"xyzzy plugh"]
    requests = _graders_requests(prompts, answers, window=1024)
    cache = ContextCache()
    widths, handle = _steps(model)
    try:
        got = [model.next_byte_logprobs(c, cache=cache) for c in requests]
    finally:
        handle.remove()
    assert widths[0] == len(b"first prompt") and widths[1:] == [1] * (len(requests) - 1)
    for contexts, cached in zip(requests, got, strict=True):
        assert torch.allclose(cached, model.next_byte_logprobs(contexts), atol=1e-4)


@pytest.mark.parametrize("graphs", [False, True], ids=["eager", "step-graphs"])
def test_cached_logprobs_grow_past_their_room_and_follow_reordered_rows(graphs: bool) -> None:
    torch.manual_seed(1)
    gpt = GPT(ModelConfig(block_size=256, n_layer=2, n_head=2, d_model=32)).eval()
    gpt.use_graphs = graphs
    long = bytes(range(32, 127)) * 2  # 190 bytes: the cache's room (64) must grow twice
    cache = ContextCache()
    widths, handle = _steps(gpt)
    try:
        for k in range(1, len(long)):
            # Two rows that swap places every call: the cache gathers them back in order.
            contexts = [long[:k], b"<" + long[:k]]
            contexts = contexts if k % 2 else contexts[::-1]
            cached = gpt.next_byte_logprobs(contexts, cache=cache)
            assert torch.allclose(cached, gpt.next_byte_logprobs(contexts), atol=1e-4), k
    finally:
        handle.remove()
    assert widths[0::2][1:] == [1] * (len(long) - 2)
    assert all(layer.k.shape[2] >= len(long) for layer in cache.layers)


def test_an_unrelated_call_after_a_cached_one_is_a_whole_pass(model: GPT) -> None:
    cache = ContextCache()
    model.next_byte_logprobs([b"abc", b"def"], cache=cache)
    other = [b"abcX", b"zzz"]  # one row extends, the other does not: no step
    assert torch.allclose(
        model.next_byte_logprobs(other, cache=cache), model.next_byte_logprobs(other), atol=1e-4
    )
    assert set(cache.rows) == set(other)


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


def test_decoding_steps_keep_one_shape_per_batch(model: GPT, monkeypatch) -> None:
    """No per-shape cost while decoding: every step of a batch attends over the same shapes (the
    cache's whole capacity, masked), however many bytes it has generated."""
    import model as model_module

    seen: list[tuple[tuple[int, ...], ...]] = []
    real = model_module.decode_attention

    def spy(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor):
        seen.append((tuple(q.shape), tuple(k.shape), tuple(mask.shape)))
        return real(q, k, v, mask)

    monkeypatch.setattr(model_module, "decode_attention", spy)
    out = model.generate(PROMPTS, [12] * len(PROMPTS))
    assert out == model.generate(PROMPTS, [12] * len(PROMPTS), use_cache=False)
    per_layer = len(model.blocks)
    assert len(seen) == 11 * per_layer  # every step after the prefill went through it
    assert len(set(seen)) == 1, set(seen)


def test_generation_between_cached_steps_leaves_the_context_cache_alone(model: GPT) -> None:
    """`generate` and the phase-2 cache never share a step graph's buffers, even at one shape."""
    prompts = [b"first prompt", b"second", b"3"]
    answers = [b"one two three", b"four", b"xyzzy plugh"]
    requests = _graders_requests(prompts, answers, window=1024)
    cache = ContextCache()
    first = requests[0]
    for contexts in requests:
        cached = model.next_byte_logprobs(contexts, cache=cache)
        # The cache's own shape: its first batch, and room for ContextCache.ROOM more bytes.
        model.generate(first, [ContextCache.ROOM] * len(first))
        assert torch.allclose(cached, model.next_byte_logprobs(contexts), atol=1e-4)
