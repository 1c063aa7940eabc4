"""The look-up probe of the learnability frontier (`benchmarks/lookup_probe.py`): its layouts
say what its docs claim, its scores count an answer right only when every byte is, and a short
run prints its last line; `bench_learner.py` takes re-asks as a variant."""

from __future__ import annotations

import random
import re
import subprocess
import sys

import pytest
import torch

from exam_builder.chance import question_chance
from tests import benchmark_scripts

probe = benchmark_scripts.load("lookup_probe")


def prompts(task: str, pairs: int = 6) -> list[tuple[str, str]]:
    """(prompt, answer) of every question of a few documents, earlier answers in sight."""
    out = []
    for seed in range(20):
        parts = probe.Task(task, pairs, 3).document(random.Random(seed), list(range(pairs)))
        seen = ""
        for text, is_answer in parts:
            if is_answer:
                out.append((seen, text))
            seen += text
    return out


def test_glued_answers_are_written_after_their_key_and_split_answers_nowhere() -> None:
    for prompt, answer in prompts("glued"):
        key = prompt.rstrip()[-1]
        assert key + answer in prompt.splitlines()[0]
    for prompt, answer in prompts("split"):
        assert answer not in prompt  # the chance floor's blind pick has nothing to pick
        assert ".".join(answer) in prompt.splitlines()[0]
    for prompt, _ in prompts("wide", pairs=50):
        assert len(prompt.splitlines()[0].split()) == 51  # '#' and 50 pairs


def test_a_blind_pick_never_finds_a_split_answer_and_often_finds_a_register_value() -> None:
    """A split or glued value is no span of the answer's shape; only the pick among the
    chunks with their punctuation dropped ('joined', what an attacker's rule does) finds it,
    one time in as many entries as the register has."""
    for task in ("split", "glued"):
        for prompt, answer in prompts(task):
            chance = question_chance(prompt, answer)
            assert chance.pop("joined") == pytest.approx(1 / 6), (task, answer)
            assert max(chance.values()) == 0.0, (task, answer, chance)
    digits = [max(question_chance(p, a).values()) for p, a in prompts("digits", pairs=10)]
    assert sum(digits) / len(digits) > 0.05


def test_an_answer_counts_only_when_every_byte_is_right() -> None:
    class Fixed(torch.nn.Module):
        def __init__(self, right: list[bool]) -> None:
            super().__init__()
            self.right = right

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            logits = torch.zeros(*x.shape, 256)
            for j, ok in enumerate(self.right):
                logits[0, j, 7 if ok else 9] = 1.0
            return logits

    y = torch.full((1, 6), 7)
    w = torch.tensor([[0.0, 1.0, 1.0, 0.0, 1.0, 1.0]])  # two answers of two bytes
    scores = probe.evaluate(Fixed([True, True, True, True, False, True]), [(y, y, w)])
    assert scores.exact == 0.5 and scores.byte == 0.75
    assert scores.by_position == [0.5, 1.0]  # the second answer's first byte was wrong


def test_a_key_separator_writes_the_key_as_one_more_letter_of_its_entry() -> None:
    parts = probe.Task("split", 6, 3, key_sep=".").document(random.Random(0), list(range(6)))
    entries = parts[0][0].removeprefix("# ").split()
    assert len(entries) == 6
    assert all(re.fullmatch(r"[A-Z](\.[a-z]){3}", e) for e in entries), entries


@pytest.mark.parametrize(
    "extra",
    [[], ["--warm-pairs", "3", "--warm-share", "0.5", "--hold", "0.8", "--key-sep", "."]],
    ids=["plain", "curriculum"],
)
def test_a_short_run_prints_its_scores(extra: list[str]) -> None:
    run = subprocess.run(
        [sys.executable, str(probe.__file__), "--seconds", "1", "--task", "split", *extra],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-1].startswith("end")


def test_the_frontier_benchmark_takes_reasks() -> None:
    bench = benchmark_scripts.load("bench_learner")
    assert bench.variant("cpu+reask=1.5").reask == 1.5
