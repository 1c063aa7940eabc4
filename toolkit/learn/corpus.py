"""In-format training text: a family's own documents, from seeds the exam never uses.

Each training document is made by the family's generator exactly as an exam document is, with
the bank's parameters, but from `learn_seed(bank)` instead of the bank's seed, so no exam
document is trained on. It is written as the grader shows a prompt: each answer span is either
written out (a target: its bytes carry the full loss weight) or replaced by the mask (`MASK`,
weight 0: a model must never learn to write the mask, and in an exam two of three answer slots
before a question hold it). The other bytes carry `text_weight`: the names and numbers of a
document are random, so most of its text cannot be predicted, and a model spends its capacity
on the answers instead.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

from exam_builder.bank import Bank, BankFamily
from exam_builder.document import MASK, Answer, Document
from exam_builder.generate import document_rng
from exam_builder.lexicon import Lexicon

MASK_BYTES = MASK.encode("utf-8")


@dataclass(frozen=True)
class Example:
    """One training document: its bytes and a loss weight per byte (predicting that byte)."""

    data: bytes
    weights: list[float]

    def __post_init__(self) -> None:
        if len(self.data) != len(self.weights):
            raise ValueError("one weight per byte")


def learn_seed(bank: Bank) -> str:
    """The seed of the training documents: derived from the bank's, never equal to it (an
    exam document is never trained on)."""
    return hashlib.sha256(f"ari-bench reference learner\0{bank.seed}".encode()).hexdigest()


def render(doc: Document, rng: random.Random, mask_share: float, text_weight: float) -> Example:
    """`doc` as a training example: each answer masked with probability `mask_share`."""
    data = bytearray()
    weights: list[float] = []
    for part in doc.parts:
        if isinstance(part, Answer):
            if rng.random() < mask_share:
                data += MASK_BYTES
                weights += [0.0] * len(MASK_BYTES)
            else:
                text = part.text.encode("utf-8")
                data += text
                weights += [1.0] * len(text)
        else:
            text = part.encode("utf-8")
            data += text
            weights += [text_weight] * len(text)
    return Example(bytes(data), weights)


def repeated(example: Example) -> Example:
    """`example` written twice, only the second copy a target: a copying exercise in the
    family's own text (the skill a look-up needs, an induction head, forms on it first)."""
    data = example.data + b"\n" + example.data
    return Example(data, [0.0] * (len(example.data) + 1) + [1.0] * len(example.data))


class Corpus:
    """An endless stream of one family's training examples (document n, n+1, ...)."""

    def __init__(
        self,
        bank: Bank,
        entry: BankFamily,
        *,
        mask_share: float = 0.5,
        text_weight: float = 0.1,
        seed: int = 0,
    ) -> None:
        self._bank = bank
        self._entry = entry
        self._seed = learn_seed(bank)
        self._rng = random.Random(seed)  # which answers are masked
        self._mask_share = mask_share
        self._text_weight = text_weight
        self._next = 0

    def document(self, number: int) -> Document:
        """Training document `number` (made like exam document `number`, from another seed)."""
        rng = document_rng(self._seed, self._entry.family.name, number)
        return self._entry.family.generate(
            rng, self._entry.params, Lexicon(rng, self._bank.syllables)
        )

    def take(self, n: int) -> list[Example]:
        """The next `n` examples."""
        out = []
        for _ in range(n):
            doc = self.document(self._next)
            self._next += 1
            out.append(render(doc, self._rng, self._mask_share, self._text_weight))
        return out

    @property
    def documents(self) -> int:
        """Documents taken so far."""
        return self._next
