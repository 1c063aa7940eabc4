"""The public-side learner's training text: a public bank's generators, every register
parameter drawn afresh for each document.

An agent holds the public banks, the public exams and the docs, never a hidden bank. What it
can build for a hidden exam's tier 1 is a model trained on the public generators with
everything a hidden bank may change drawn at random: the register's heading and question
(invented words in a few public sentence shapes), its separator, its key and value alphabets,
its size and its values' width. `RandomizedCorpus` writes that text; `toolkit learn-exam
--randomize` trains on it and grades on an exam whose bank it never reads. What it cannot
draw is what a bank keeps secret by design: the names a question calls the keys by, and which
of several registers is asked (`Register.names`, `Register.decoys`), so those stay at their
public defaults (none).
"""

from __future__ import annotations

import random
import string

from pydantic import ValidationError

from exam_builder.bank import Bank, BankFamily
from exam_builder.document import Document
from exam_builder.families.register import (
    MIN_PAIRS,
    SEPARATORS,
    Register,
    RegisterPhrases,
)
from exam_builder.generate import document_rng
from exam_builder.lexicon import Lexicon
from toolkit.learn.corpus import Corpus

MAX_PAIRS = 12
"""The most entries a drawn register has (the engine's ceiling)."""
SYLLABLES: tuple[str, ...] = ("ba", "ko", "ril", "tu", "men", "sa", "dor", "vi", "lep", "ga")
SYLLABLES += ("nu", "hal", "fo", "zi", "per", "mo", "cla", "te", "wu", "yon")
"""The syllables of the drawn words (public: any hidden bank's words are as foreign)."""
QUESTION_SHAPES = ("{w} {key}", "{w} {v} {key}", "{w}: {key}", "{w} of {key}", "{w} no. {key}")
"""Sentence shapes of a drawn question (`{w}`, `{v}`: drawn words)."""
KEY_ALPHABETS = (string.ascii_uppercase, string.digits, string.ascii_uppercase + string.digits)
"""Alphabets a register's keys are drawn from."""
TRIES = 50
"""Draws tried before the first one that validates is kept (a wording may use too many
letters for a large register)."""


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 3)))


def draw_register(rng: random.Random, pairs: int | None = None) -> Register:
    """A register with every public parameter drawn (`pairs` entries where given)."""
    for _ in range(TRIES):
        keys = rng.choice(KEY_ALPHABETS)
        letters = string.ascii_lowercase
        if keys == string.ascii_uppercase and rng.random() < 0.5:
            letters += string.digits
        shape = rng.choice(QUESTION_SHAPES)
        phrases = RegisterPhrases(
            heading=_word(rng).capitalize(),
            question=shape.replace("{w}", _word(rng)).replace("{v}", _word(rng)),
        )
        size = pairs if pairs is not None else rng.randint(MIN_PAIRS, MAX_PAIRS)
        try:
            return Register(
                pairs=size,
                width=rng.randint(2, 5),
                separator=rng.choice(SEPARATORS),
                keys=keys,
                letters=letters,
                phrases=phrases,
            )
        except ValidationError:
            continue  # too few free letters or keys for this draw: draw again
    return Register(pairs=pairs or MIN_PAIRS)


def has_register(entry: BankFamily) -> bool:
    """Whether `entry`'s family writes a tier-1 register (its parameters have `lookup`)."""
    return isinstance(getattr(entry.params, "lookup", None), Register)


class RandomizedCorpus(Corpus):
    """`Corpus` of a public bank's family, each document's register drawn (`draw_register`)."""

    def __init__(
        self,
        bank: Bank,
        entry: BankFamily,
        *,
        pairs: int | None = None,
        mask_share: float = 0.5,
        text_weight: float = 0.1,
        reask: float = 0.0,
    ) -> None:
        if not bank.public:
            raise ValueError(f"{bank.id}: the public-side learner trains on a public bank only")
        super().__init__(bank, entry, mask_share=mask_share, text_weight=text_weight, reask=reask)
        self._pairs = pairs

    def document(self, number: int) -> Document:
        rng = document_rng(self._seed, self._entry.family.name, number)
        params = self._entry.params
        if has_register(self._entry):
            params = params.model_copy(update={"lookup": draw_register(rng, self._pairs)})
        return self._entry.family.generate(rng, params, Lexicon(rng, self._bank.syllables))
