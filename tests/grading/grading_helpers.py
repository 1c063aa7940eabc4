"""Shared pieces of the grading tests: the honest oracle bundle and questions it solves."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from tests.run.conftest import ShellAgent
from toolkit.agents import Agent
from toolkit.run.inputs import prepare_data, public_set
from toolkit.run.spec import RunSpec
from toolkit.tracks.model import get_track

REPO = Path(__file__).resolve().parents[2]

MakeBundle = Callable[..., Path]
MakeExam = Callable[..., Path]

# An honest bundle that solves "The code is XYZ. ... the code is " prompts by rule.
ORACLE = """
    import re

    class Oracle:
        def generate(self, prompts, lengths):
            out = []
            for prompt, n in zip(prompts, lengths):
                found = re.findall(rb"code is (\\w+)", prompt)
                out.append((found[0] if found else b"?")[:n].ljust(n, b"?"))
            return out

        def next_byte_logprobs(self, contexts):
            import numpy as np
            return np.full((len(contexts), 256), -np.log(256.0), dtype=np.float32)

    def load(bundle_dir, device):
        return Oracle()
"""

STARTER_BUDGET_S = 60
"""The seconds `trained_starter` (conftest.py) gives train.py at most."""
STARTER_STEPS = 40
"""The steps it trains for (`--max-steps`): a fixed amount of work, not a minute of whatever
the machine has to spare (a minute was 54 CPU seconds of the suite). The budget stop rule is
tested on its own in tests/starter/test_train_budget.py."""


class TrainedStarter(NamedTuple):
    bundle: Path
    exam: Path  # the demo exam's first three questions of each family (24)
    wall_s: float  # train.py's wall time, interpreter start-up included


def code_questions(count: int, family: str = "extraction") -> list[dict[str, str]]:
    """Questions whose answer is a code stated earlier in the prompt (the oracle solves them)."""
    return [
        {
            "id": f"{family}-{i}",
            "family": family,
            "prompt": f"Memo {i}. The code is K{i}Q{i * 7}Z. Later, asked again, the code is ",
            "answer": f"K{i}Q{i * 7}Z",
        }
        for i in range(count)
    ]


def submit_and_promote(source: str) -> ShellAgent:
    return ShellAgent(
        "mkdir -p bundles/b\n"
        f"cat > bundles/b/inference.py <<'PYEOF'\n{textwrap.dedent(source)}\nPYEOF\n"
        "runner submit bundles/b\nrunner promote c001\n"
    )


def run_spec(agent: Agent, exam: Path, tmp_path: Path) -> RunSpec:
    text = tmp_path / "text.txt"
    text.write_text("the quick brown fox jumps over a lazy dog\n" * 2000)
    return RunSpec(
        track=get_track(REPO / "results", "demo-cpu-3"),
        model="none",
        seed=0,
        agent=agent,
        exam=exam,
        public_set=public_set(),
        data_dir=prepare_data(text, tmp_path / "data"),
        results_dir=tmp_path / "results",
        budget_s=120,
        per_call_limit_s=60,
        reserved_s=10,
    )
