"""In-format training text: a family's own documents, from seeds the exam never uses.

Each training document is made by the family's generator exactly as an exam document is, with
the bank's parameters, but from `learn_seed(bank)` instead of the bank's seed, so no exam
document is trained on. It is written as the grader shows a prompt: each answer span is either
written out (a target: its bytes carry the full loss weight) or replaced by the mask (`MASK`,
weight 0: a model must never learn to write the mask, and in an exam two of three answer slots
before a question hold it). The other bytes carry `text_weight`: the names and numbers of a
document are random, so most of its text cannot be predicted, and a model spends its capacity
on the answers instead.

Re-asks (`reask`, per question): a training document may also ask its questions again, each
a copy of a question's line (the text since the line break before the answer, the answer, and
the rest of its line) put at a random line break after the original. Where the original's answer
is shown, the copy is an easy look-up (the same line, higher up); where it is masked, the copy
is the look-up itself, answered from the document. They are the stepping stone a small model
needs, measured on the `glued6` probe (`benchmarks/lookup_probe.py`, `bench_learner.py`): it
learns to copy the answer of the same question first, then to find it in the document, where
one ask per key leaves the look-up at chance for as long as the cpu scale trains.

The smallest register (`smallest`): the same family with its tier-1 register at its fewest
entries (`MIN_PAIRS`), the first part of the training time (`Scale.small_share`). Its documents
are a third as long, so a step costs less and each byte of an answer has fewer places to look;
the copy through the separator forms there in a few hundred steps and carries over to the
family's own register at once, where on the full register it can take as long as the time has
(measured on the `split` probe, site/docs/maintainers/exams.md, the learnability frontier).
"""

from __future__ import annotations

import bisect
import hashlib
import random
from dataclasses import dataclass, replace

from exam_builder.bank import Bank, BankFamily
from exam_builder.document import MASK, Answer, Document
from exam_builder.families.register import MIN_PAIRS, Register
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


Piece = tuple[bytes, list[float]]
"""Some bytes of a training example and their weights."""


def weighted(text: str, weight: float) -> Piece:
    """`text`'s bytes, each of `weight`."""
    raw = text.encode("utf-8")
    return raw, [weight] * len(raw)


@dataclass(frozen=True)
class _Question:
    """A question's own line: the text before its answer (since the last line break), the
    answer, and the rest of the line, its line break included."""

    before: str
    answer: str
    after: str

    def pieces(self, text_weight: float) -> list[Piece]:
        return [
            weighted(self.before, text_weight),
            weighted(self.answer, 1.0),
            weighted(self.after, text_weight),
        ]


Cut = list[tuple[str, str | None]]
"""A document as pieces: (text, None) cut after each line break, or ("", answer)."""


def pieces_of(doc: Document) -> Cut:
    """`doc`'s parts as pieces, its text cut after each line break."""
    pieces: Cut = []
    for part in doc.parts:
        if isinstance(part, Answer):
            pieces.append(("", part.text))
            continue
        lines = part.split("\n")
        pieces += [(line + "\n", None) for line in lines[:-1]]
        if lines[-1]:
            pieces.append((lines[-1], None))
    return pieces


def questions_of(pieces: Cut) -> list[tuple[int, _Question]]:
    """Each question that sits on a line with text before its answer and a line break after
    it, with the index of the piece that ends its line."""
    out: list[tuple[int, _Question]] = []
    line_start = 0
    for i, (text, answer) in enumerate(pieces):
        if answer is None:
            if text.endswith("\n"):
                line_start = i + 1
            continue
        before = "".join(t if a is None else a for t, a in pieces[line_start:i])
        after = ""
        for j in range(i + 1, len(pieces)):
            text_j, answer_j = pieces[j]
            if answer_j is not None:
                break
            after += text_j
            if text_j.endswith("\n"):
                if before:
                    out.append((j, _Question(before, answer, after)))
                break
    return out


def render(
    doc: Document,
    rng: random.Random,
    mask_share: float,
    text_weight: float,
    reask: float = 0.0,
) -> Example:
    """`doc` as a training example: each answer masked with probability `mask_share`, and
    `reask` times as many questions as it has asked again (shown, drawn from its questions),
    each at a random line break after its own."""
    pieces = pieces_of(doc)
    extra: dict[int, list[Piece]] = {}
    asked = questions_of(pieces) if reask else []
    breaks = [i for i, (text, answer) in enumerate(pieces) if answer is None and text[-1:] == "\n"]
    for _ in range(round(reask * len(asked))):
        end, question = rng.choice(asked)
        at = rng.choice(breaks[bisect.bisect_left(breaks, end) :])  # a line break after its own
        extra.setdefault(at, []).extend(question.pieces(text_weight))
    data = bytearray()
    weights: list[float] = []
    for i, (text, answer) in enumerate(pieces):
        if answer is None:
            piece = weighted(text, text_weight)
        elif rng.random() < mask_share:
            piece = weighted(MASK, 0.0)
        else:
            piece = weighted(answer, 1.0)
        for raw, raw_weights in [piece, *extra.get(i, [])]:
            data += raw
            weights += raw_weights
    return Example(bytes(data), weights)


def repeated(example: Example) -> Example:
    """`example` written twice, only the second copy a target: a copying exercise in the
    family's own text (the skill a look-up needs, an induction head, forms on it first)."""
    data = example.data + b"\n" + example.data
    return Example(data, [0.0] * (len(example.data) + 1) + [1.0] * len(example.data))


def _with_params(entry: BankFamily, **update: object) -> BankFamily:
    """`entry` with some of its parameters replaced (the bank's entry is left as it is)."""
    return replace(entry, params=entry.params.model_copy(update=update))


def focused(entry: BankFamily, tiers: tuple[int, ...] | None) -> BankFamily:
    """`entry` with its bank's mix narrowed to `tiers` (their weights as the bank sets them),
    where the mix asks for any of them; as it is otherwise (no mix, or none of `tiers` in it:
    the family's documents as the bank makes them)."""
    if tiers is None:
        return entry
    mix = {t: w for t, w in entry.params.tiers.items() if t in tiers and w > 0}
    if not mix or mix == entry.params.tiers:
        return entry
    return _with_params(entry, tiers=mix)


def smallest(entry: BankFamily) -> BankFamily | None:
    """`entry` with its tier-1 register at `MIN_PAIRS` entries and alone, without its decoy
    registers (its wording, names, separator and alphabets as they are); None where the family
    has no register, or it is that small and alone already.

    Without the decoys the first steps learn the look-up through the bank's names; the decoys
    (which register is asked) come after. Measured on a register of 10 named keys among 4
    decoys, 2,000 steps at the cpu scale: 37 of 40 with the decoys left out here, 2 of 40 with
    them kept, 0 of 40 with the names left out instead (exams.md, the frontier)."""
    lookup = getattr(entry.params, "lookup", None)
    if not isinstance(lookup, Register) or (lookup.pairs <= MIN_PAIRS and not lookup.decoys):
        return None
    alone = {"pairs": min(lookup.pairs, MIN_PAIRS), "decoys": 0, "decoy_headings": ()}
    return _with_params(entry, lookup=lookup.model_copy(update=alone))


class Corpus:
    """An endless stream of one family's training examples (document n, n+1, ...)."""

    def __init__(
        self,
        bank: Bank,
        entry: BankFamily,
        *,
        mask_share: float = 0.5,
        text_weight: float = 0.1,
        reask: float = 0.0,
        seed: int = 0,
    ) -> None:
        self._bank = bank
        self._entry = entry
        self._seed = learn_seed(bank)
        self._rng = random.Random(seed)  # which answers are masked
        self._mask_share = mask_share
        self._text_weight = text_weight
        self._reask = reask
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
            out.append(render(doc, self._rng, self._mask_share, self._text_weight, self._reask))
        return out

    def take_bytes(self, budget: int, block: int) -> list[Example]:
        """The next examples, until their bytes (each at most a window of `block` + 1) reach
        `budget`: at least one. A batch of short documents then holds more of them, and one
        of long documents fewer, for about the same work a step."""
        out: list[Example] = []
        total = 0
        while total < budget:
            out += self.take(1)
            total += min(len(out[-1].data), block + 1)
        return out

    @property
    def documents(self) -> int:
        """Documents taken so far."""
        return self._next
