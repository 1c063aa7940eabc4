"""Shared pieces of the grading tests: the honest oracle bundle and questions it solves."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

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
