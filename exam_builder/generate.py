"""From a bank to questions: seeded documents, masked into prompts, in a fixed order.

Determinism: every document gets its own `random.Random`, seeded from SHA-256 of (bank seed,
family name, document number). Nothing else is random: no global `random`, no `hash()`, no
iteration over sets, no locale or clock. So the same bank gives the same bytes in any process,
and generation is linear in the number of questions (document n depends on the ones before it
only through its tier, below).

Tiers: where a bank sets a mix of two or more tiers for a family, the engine chooses each exam
document's tier so that the exam follows the mix (`next_tier`: the tier furthest behind its
share of the questions so far), and the family makes that tier (its parameters' `tiers` narrowed
to it). A few documents a family, drawn at random, would give a demo family no tier-1 question
at all as easily as half of them. Outside the exam (the learner's text, the answer samples of
the gate) the family draws each document's tier by the weights itself.
"""

from __future__ import annotations

import gc
import hashlib
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from exam_builder.bank import Bank, BankError, BankFamily, load_bank
from exam_builder.document import MASK, Document
from exam_builder.exam_file import Question
from exam_builder.families import AnyFamily
from exam_builder.lexicon import Lexicon


@dataclass(frozen=True)
class GeneratedDocument:
    """One document and the questions taken from it (the last one of a family may be cut)."""

    entry: BankFamily
    number: int
    document: Document
    questions: list[Question]


def document_rng(seed: str, family: str, number: int) -> random.Random:
    material = f"{seed}\0{family}\0{number}".encode()
    return random.Random(int.from_bytes(hashlib.sha256(material).digest(), "big"))


def next_tier(mix: dict[int, float], made: dict[int, int]) -> int | None:
    """The tier of a family's next exam document: the one furthest behind its share of the
    questions made so far (`made`: questions per tier), the lowest on a tie; None where the mix
    has fewer than two tiers (the family draws, or makes its one tier)."""
    weights = {t: w for t, w in sorted(mix.items()) if w > 0}
    if len(weights) < 2:
        return None
    total, weight = sum(made.values()) + 1, sum(weights.values())
    return max(weights, key=lambda t: (weights[t] / weight * total - made.get(t, 0), -t))


def _document(bank: Bank, entry: BankFamily, number: int, tier: int | None = None) -> Document:
    rng = document_rng(bank.seed, entry.family.name, number)
    builtin = entry.source == "built-in"
    params = (
        entry.params if tier is None else entry.params.model_copy(update={"tiers": {tier: 1.0}})
    )
    try:
        doc = entry.family.generate(rng, params, Lexicon(rng, bank.syllables))
    except Exception as exc:
        if builtin and not isinstance(exc, ValueError):
            raise  # our bug: a traceback helps more than a one-liner
        msg = f"generate raised {type(exc).__name__}: {exc}"
        raise BankError(f"{bank.where(entry)}: {msg}") from exc
    if not isinstance(doc, Document) or not doc.answers:
        raise BankError(f"{bank.where(entry)}: generate must return a Document with an answer")
    if "\u2592" in doc.text():
        raise BankError(f"{bank.where(entry)}: a document contains the mask character of {MASK}")
    return doc


def _checked_tiers(bank: Bank, entry: BankFamily, doc: Document) -> list[int | None]:
    """The tier of each of `doc`'s questions as the generator marked it (None: unmarked, the
    family's first tier, its own; `question_tier` resolves it); `BankError` for a tier the
    family does not declare, or an unmarked question where the bank sets a mix of tiers for a
    family that declares several (with no mix, a family makes its first tier only)."""
    declared = entry.family.tiers
    mixed = bool(entry.params.tiers)  # the bank asks for a mix of tiers
    for tier in doc.tiers:
        unmarked_of_several = tier is None and len(declared) > 1 and mixed
        undeclared = tier is not None and tier not in declared
        if unmarked_of_several or undeclared:
            what = "an unmarked question" if tier is None else f"a question of tier {tier}"
            raise BankError(
                f"{bank.where(entry)}: generate made {what}; the family declares tiers "
                f"{list(declared)} (mark each question: doc.ask(answer, tier=...))"
            )
    return doc.tiers


def question_tier(question: Question, family: AnyFamily) -> int:
    """A question's tier: as marked in the exam, else its family's first (its own)."""
    return question.tier if question.tier is not None else family.tiers[0]


Progress = Callable[[int], None]
"""Called with the number of questions just handled (drives a progress bar)."""


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector: generation makes millions of acyclic objects, and
    its full collections would rescan them all, making large exams super-linear (about 1.5x
    slower at 100,000 questions). Reference counting still frees everything."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def generate_documents(bank: Bank, progress: Progress | None = None) -> list[GeneratedDocument]:
    """Every document of the exam, with its questions, families in the bank's order."""
    with _gc_paused():
        return _generate_documents(bank, progress)


def _generate_documents(bank: Bank, progress: Progress | None) -> list[GeneratedDocument]:
    out: list[GeneratedDocument] = []
    for entry in bank.families:
        name, left, number = entry.family.name, entry.count, 0
        made: dict[int, int] = {}
        while left > 0:
            doc = _document(bank, entry, number, next_tier(entry.params.tiers, made))
            tiers = _checked_tiers(bank, entry, doc)
            questions = [
                Question(id=f"{name}-{number:04d}-{span}", family=name, prompt=p, answer=a, tier=t)
                for span, ((p, a), t) in enumerate(zip(doc.prompts()[:left], tiers, strict=False))
            ]
            for q in questions:
                tier = question_tier(q, entry.family)
                made[tier] = made.get(tier, 0) + 1
            out.append(GeneratedDocument(entry, number, doc, questions))
            left -= len(questions)
            number += 1
            if progress is not None:
                progress(len(questions))
    return out


def sample_answers(bank: Bank, entry: BankFamily, first: int, n: int) -> list[str]:
    """`n` answers of `entry`'s family from documents numbered `first` on (documents the exam
    does not hold when `first` is past its last): a sample of the family's answers."""
    out: list[str] = []
    number = first
    with _gc_paused():
        while len(out) < n:
            out += _document(bank, entry, number).answers[: n - len(out)]
            number += 1
    return out


def generate_questions(bank: Bank | Path) -> list[Question]:
    """The exam's questions, in file order (pure: the same bank gives the same list).

    `bank` is a loaded `Bank` or a bank directory (loaded and validated first).
    """
    loaded = bank if isinstance(bank, Bank) else load_bank(bank)
    return [q for d in generate_documents(loaded) for q in d.questions]
