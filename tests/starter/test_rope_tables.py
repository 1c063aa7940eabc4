"""Training passes the rotary tables into the model (made once per length, outside any compiled
graph) instead of letting the compiled forward compute them: on an H100, torch.compile fused the
cosines and sines into the kernels that rotate queries and keys and recomputed them for every
element, nearly a third of the step. And a bundle's model.py stays cheap to import: a first fix
(`torch.compiler.disable` in model.py) imported torch._dynamo at every bundle load and cost the
grader 5 seconds on that H100."""

from __future__ import annotations

import shutil
import subprocess
import sys
from typing import Any

import pytest
import torch
from conftest import STARTER
from model import GPT, ModelConfig
from train import build_model, configure, loss_function


def small_model() -> GPT:
    torch.manual_seed(0)
    return GPT(ModelConfig(block_size=64, n_layer=2, n_head=2, d_model=32))


def test_tables_passed_in_compute_what_the_model_computes_alone() -> None:
    model = small_model()
    idx = torch.randint(0, 256, (3, 40))
    with torch.no_grad():
        alone = model(idx)
        given = model(idx, rope=model.rope(40, idx.device))
    assert torch.equal(alone, given)
    cos, sin = model.rope(40, "cpu")
    assert cos.shape == sin.shape == (1, 40, 8)  # (1, length, head_dim / 2)


class Spy(torch.nn.Module):
    """Stands where the compiled model stands in `loss_function`: records what forward gets."""

    def __init__(self, model: GPT) -> None:
        super().__init__()
        self.model = model
        self.calls: list[dict[str, Any]] = []

    def rope(self, length: int, device: torch.device | str) -> tuple[torch.Tensor, torch.Tensor]:
        return self.model.rope(length, device)

    def forward(self, idx: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        self.calls.append(kwargs)
        return self.model(idx, **kwargs)


def test_the_loss_gives_the_model_its_tables_made_once_per_length() -> None:
    spy = Spy(small_model())
    loss_of = loss_function(spy, "cpu")
    x, y = torch.randint(0, 256, (2, 2, 48))
    first, again = loss_of(x, y), loss_of(x, y)
    assert torch.equal(first, again)
    tables = [call.get("rope") for call in spy.calls]
    assert tables[0] is not None and tables[0] is tables[1], "made once, then reused"
    loss_of(x[:, :20], y[:, :20])  # another length: its own tables
    assert spy.calls[-1]["rope"][0].shape[1] == 20
    # The same loss as the model computing its own tables.
    plain = torch.nn.functional.cross_entropy(spy.model(x).view(-1, 256), y.reshape(-1))
    assert torch.allclose(first, plain)


def test_a_bundles_model_and_inference_import_without_the_compiler() -> None:
    code = (
        f"import sys; sys.path.insert(0, {str(STARTER)!r}); import model, inference; "
        "compiler = ('torch._dynamo', 'torch._inductor'); "
        "print(sorted(m for m in sys.modules if m.startswith(compiler)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd="/"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("cc") is None, reason="torch.compile on CPU needs a C compiler")
def test_the_compiled_training_step_has_no_graph_break_and_matches_eager() -> None:
    from torch._dynamo.utils import counters

    # One block: each block is traced from the same code, and the compiler's time grows with
    # the graph (31.6 CPU s with the preset's two blocks, 20.6 with one, inductor's cache empty).
    cfg = configure("micro", ["block_size=64", "n_layer=1"])
    torch.manual_seed(0)
    eager_model = build_model(cfg, "cpu")
    compiled_model = build_model(cfg, "cpu")
    compiled_model.load_state_dict(eager_model.state_dict())
    x, y = torch.randint(0, 256, (2, 4, 64))
    counters.clear()
    eager = loss_function(eager_model, "cpu")(x, y)
    compiled = loss_function(torch.compile(compiled_model), "cpu")(x, y)
    eager.backward()
    compiled.backward()
    assert not counters["graph_break"], dict(counters["graph_break"])
    assert torch.allclose(eager, compiled, atol=1e-5)
    for a, b in zip(eager_model.parameters(), compiled_model.parameters(), strict=True):
        assert a.grad is not None and b.grad is not None
        assert torch.allclose(a.grad, b.grad, atol=1e-5)
