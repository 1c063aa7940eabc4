"""A bundle with no model (a test fixture for the weights ablation): string rules keyed on the
wording of three demo-exam families. It loads a dummy weights file so that it looks like a
model, and never uses it: its score survives the weights ablation.

With RULES_FILE set, the rules' keywords come from a JSON file instead of this source: the same
solver with its rules stored as data (the ablation destroys them, and the bundle collapses).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

RULES_FILE: str | None = None
KEYWORDS = {"reverse": "backwards", "sequence": "Sequence", "term": "Term"}


class Rules:
    def __init__(self, keywords: dict[str, str]) -> None:
        self.words = keywords

    def answer(self, prompt: str) -> str:
        w = self.words
        found = re.search(rf"List of the (\w+): (.*)\.\nThe \1 {w['reverse']}: $", prompt)
        if found:
            return ", ".join(reversed(found.group(2).split(", ")))
        sequence = rf"{w['sequence']} (\w+): ([-\d, ]+), \.\.\.\n{w['term']} (\d+) of \1: $"
        found = re.search(sequence, prompt)
        if found:
            terms = [int(t) for t in found.group(2).split(", ")]
            step = terms[1] - terms[0]
            return str(terms[0] + step * (int(found.group(3)) - 1))
        found = re.search(r"The (\w+) of (\w+) is $", prompt)
        if found:
            lines = prompt.splitlines()
            for i, line in enumerate(lines):
                header = [c.strip() for c in line.split("|")]
                if found.group(1) in header and "name" in header:
                    for row in lines[i + 1 :]:
                        cells = [c.strip() for c in row.split("|")]
                        if cells and cells[0] == found.group(2) and len(cells) == len(header):
                            return cells[header.index(found.group(1))]
        return ""

    def generate(self, prompts: list[bytes], lengths: list[int]) -> list[bytes]:
        out = []
        for prompt, n in zip(prompts, lengths, strict=True):
            guess = self.answer(prompt.decode("utf-8", errors="replace")).encode()
            out.append((guess + b"\n" * n)[:n])
        return out

    def next_byte_logprobs(self, contexts: list[bytes]) -> np.ndarray:
        return np.full((len(contexts), 256), -np.log(256.0), dtype=np.float32)


def load(bundle_dir: str, device: str = "cpu") -> Rules:
    root = Path(bundle_dir)
    np.load(root / "weights.npy")  # looks like a model; never used
    if RULES_FILE is not None:
        return Rules(json.loads((root / RULES_FILE).read_text(encoding="utf-8")))
    return Rules(KEYWORDS)
