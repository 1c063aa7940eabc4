"""Tier 1 of a family: one look-up in a short register, among same-shape distractors.

    Lockers
    Kq.z.w Mb.j.n Rt.u.h Ax.i.f Pd.g.v Dp.y.a
    locker Rtuh
    locker K▒▒▒
    locker Ax

A register line holds `pairs` entries, each a one-byte key (a capital) glued to a value of
`width` letters written with a separator between them (`q.z.w`); each question names a key and
is answered with its value's letters joined (`qzw`). Every value letter is used once in the
document, and every entry has the value's shape, so a blind pick among the document's spans
finds nothing, and what follows the key is the value as the register writes it, not the answer:
a rule that copies what followed the key (the generic `induction` and `after_key` solvers) is
wrong by the separator. It generalises the `split6` probe of the learnability frontier, the
one look-up that a small model has been measured to learn in minutes while rules read none of
it; the reference learner at the `cpu` scale learns it in a family's wording once it starts on
the smallest register (`MIN_PAIRS` entries: toolkit/learn/corpus.py, `smallest`), measured per
family in site/docs/maintainers/exams.md, the learnability frontier.

A rule written for this layout reads it, as a family's own solver reads its family: what a
hidden bank keeps secret is its wording (the heading and the question), its separator and its
alphabets, so that neither the public engine's defaults nor a rule written against the public
banks find the register. The tier is the family's, not a family of its own: the register is
written in the family's words (`RegisterPhrases` defaults per family) and drawn by the bank's
tier mix (`Params.tiers`) beside the family's own documents (`with_register`).
"""

from __future__ import annotations

import itertools
import random
import re
import string
from collections.abc import Callable
from dataclasses import replace
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from exam_builder.document import Answer, Document
from exam_builder.families.base import Params, last_line, pick_tier
from exam_builder.families.phrasing import Phrases, template_regex
from exam_builder.lexicon import Lexicon

SEPARATORS = "./-:+_~|*=^"
"""The separators a register may write between a value's letters: ASCII punctuation that no
key or value alphabet holds."""


MIN_PAIRS = 3
"""The fewest entries a register may have."""
VALUE_TRIES = 100
"""Draws of a named register's values tried before the last one is kept (`Register._values`)."""


def _stems(text: str) -> list[str]:
    """`text`'s words as a rule would match them: lowercase, at most four letters."""
    return [w.lower()[:4] for w in re.findall(r"[A-Za-z]+", text)]


class RegisterPhrases(Phrases):
    """Wording: the heading (one line above the register) and the question, which ends with
    the key so that the answer follows it."""

    SLOTS: ClassVar[dict[str, tuple[str, ...]]] = {"heading": (), "question": ("key",)}
    heading: str = "Register"
    question: str = "entry {key}"

    @field_validator("question")
    @classmethod
    def _ends_with_key(cls, v: str) -> str:
        if not v.endswith("{key}"):
            raise ValueError(f"{v!r} must end with {{key}}: the answer follows the key")
        return v


class Register(BaseModel):
    """A family's tier-1 register (the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pairs: int = Field(default=6, ge=MIN_PAIRS, le=12, description="Entries in the register.")
    width: int = Field(default=3, ge=2, le=5, description="Letters in a value.")
    separator: str = Field(
        default=".",
        min_length=1,
        max_length=1,
        description=f"Written between a value's letters in the register, one of {SEPARATORS}.",
    )
    keys: str = Field(
        default=string.ascii_uppercase, description="The keys' alphabet (one byte a key)."
    )
    letters: str = Field(default=string.ascii_lowercase, description="The values' alphabet.")
    phrases: RegisterPhrases = Field(default_factory=RegisterPhrases, description="Wording.")
    names: tuple[str, ...] = Field(
        default=(),
        description="The words the questions name the keys by, one per key of `keys`, in its "
        "order (empty: a question names the key itself). The register writes the key, the "
        "question its name: no byte of the question stands in the register.",
    )
    decoys: int = Field(
        default=0,
        ge=0,
        le=6,
        description="Other registers in each document, under `decoy_headings`, with the same "
        "keys in another order and other values; the questions ask the register under "
        "`phrases.heading` only.",
    )
    decoy_headings: tuple[str, ...] = Field(
        default=(), description="The decoy registers' headings, one per decoy."
    )

    @field_validator("separator")
    @classmethod
    def _separator(cls, v: str) -> str:
        if v not in SEPARATORS:
            raise ValueError(f"{v!r}: a separator is one of {SEPARATORS}")
        return v

    @model_validator(mode="after")
    def _alphabets(self) -> Register:
        for name, alphabet in (("keys", self.keys), ("letters", self.letters)):
            if (
                not alphabet.isascii()
                or not alphabet.isalnum()
                or len(set(alphabet)) != len(alphabet)
            ):
                raise ValueError(f"{name}: distinct ASCII letters or digits, not {alphabet!r}")
        if set(self.keys) & set(self.letters):
            raise ValueError("keys and letters must not share a character")
        if len(self.free_keys()) < self.pairs:
            raise ValueError(
                f"keys: {self.pairs} entries need {self.pairs} keys that the heading and "
                f"question do not use; {len(self.free_keys())} are"
            )
        self._check_names()
        self._check_decoys()
        if len(self.free_letters()) < self.pairs * self.width:
            raise ValueError(
                f"letters: {self.pairs} values of {self.width} need {self.pairs * self.width} "
                f"letters that the heading and question do not use; {len(self.free_letters())} are"
            )
        return self

    def _check_names(self) -> None:
        if not self.names:
            return
        if len(self.names) != len(self.keys):
            raise ValueError(
                f"names: one per key of keys ({len(self.keys)}), not {len(self.names)}"
            )
        for name in self.names:
            if not (name.isascii() and name.isalpha() and name.islower() and 2 <= len(name) <= 12):
                raise ValueError(f"names: words of 2 to 12 small ASCII letters, not {name!r}")
        if len(set(self.names)) != len(self.names):
            raise ValueError("names: every key needs a name of its own")

    def _check_decoys(self) -> None:
        if len(self.decoy_headings) != self.decoys:
            raise ValueError(
                f"decoy_headings: one per decoy register ({self.decoys}), not "
                f"{len(self.decoy_headings)}: every document shows every heading, so that no "
                "heading is told by how often it appears"
            )
        headings = [self.phrases.heading, *self.decoy_headings]
        if len(set(headings)) != len(headings) or any("\n" in h for h in headings):
            raise ValueError("decoy_headings: one-line headings, each unlike the others")
        if self.decoys:
            asked = set(_stems(self.phrases.question.replace("{key}", "")))
            shared = sorted(asked.intersection(s for h in headings for s in _stems(h)))
            if shared:
                raise ValueError(
                    f"with decoys the question shares no word with a heading (it shares "
                    f"{', '.join(shared)}): a rule would pick the register by the word"
                )

    def spoken(self, key: str) -> str:
        """How a question names `key`: its name where the register has `names`."""
        return self.names[self.keys.index(key)] if self.names else key

    def _unused(self, alphabet: str) -> str:
        used = set(self.phrases.heading) | set(self.phrases.question.replace("{key}", ""))
        return "".join(c for c in alphabet if c not in used)

    def free_keys(self) -> str:
        """The keys that the wording never writes (a key is written once in the register)."""
        return self._unused(self.keys)

    def free_letters(self) -> str:
        """The value letters that the wording never writes (a value letter is used once in its
        document, so that a pick or a copy from the wording finds none)."""
        return self._unused(self.letters)

    def document(self, rng: random.Random, questions: int) -> Document:
        """A register and `questions` look-ups in it (tier 1), each key asked at most once."""
        if self.names or self.decoys:
            return self._named_document(rng, questions)
        keys = rng.sample(self.free_keys(), self.pairs)
        letters = rng.sample(self.free_letters(), self.pairs * self.width)
        values = [
            "".join(letters[i * self.width : (i + 1) * self.width]) for i in range(self.pairs)
        ]
        doc = Document()
        doc.say(self.phrases.heading + "\n")
        doc.say(" ".join(k + self.separator.join(v) for k, v in zip(keys, values, strict=True)))
        doc.say("\n")
        for i in rng.sample(range(self.pairs), min(questions, self.pairs)):
            doc.say(self.phrases.question.format(key=keys[i]))
            doc.ask(values[i], tier=1)
            doc.say("\n")
        return doc

    def _named_document(self, rng: random.Random, questions: int) -> Document:
        """The register among its decoys, every register with the same keys (each in its own
        order) and its own values, the registers in a random order; the questions ask the
        first heading's register, naming each key by its name (`names`) where it has one."""
        keys = rng.sample(self.free_keys(), self.pairs)
        headings = [self.phrases.heading, *self.decoy_headings]
        registers: list[dict[str, str]] = []
        for _ in headings:
            values = self._values(rng)
            registers.append(dict(zip(rng.sample(keys, self.pairs), values, strict=True)))
        doc = Document()
        for i in rng.sample(range(len(headings)), len(headings)):
            line = " ".join(k + self.separator.join(v) for k, v in registers[i].items())
            doc.say(headings[i] + "\n" + line + "\n")
        for key in rng.sample(keys, min(questions, self.pairs)):
            doc.say(self.phrases.question.format(key=self.spoken(key)))
            doc.ask(registers[0][key], tier=1)
            doc.say("\n")
        return doc

    def _values(self, rng: random.Random) -> list[str]:
        """One register's values, its letters each used once, and none the start of a word
        the document writes (a name, a heading's or the question's word): a guess that picks
        such a word is never right by its first letters."""
        words = [*self.names, *(w.lower() for w in re.findall(r"[A-Za-z]+", self._wording()))]
        values: list[str] = []
        for _ in range(VALUE_TRIES):
            drawn = rng.sample(self.free_letters(), self.pairs * self.width)
            values = [
                "".join(drawn[i * self.width : (i + 1) * self.width]) for i in range(self.pairs)
            ]
            if not any(w.startswith(v) for v in values for w in words):
                break
        return values

    def _wording(self) -> str:
        return " ".join([self.phrases.heading, self.phrases.question, *self.decoy_headings])

    def answer(self, prompt: str) -> str | None:
        """The answer to a register question (None: the prompt does not end in one)."""
        if self.names:
            key_class = "|".join(re.escape(n) for n in sorted(self.names, key=len, reverse=True))
        else:
            key_class = "[" + re.escape(self.keys) + "]"
        asked = re.fullmatch(
            template_regex(self.phrases.question, key=key_class), last_line(prompt)
        )
        if asked is None:
            return None
        key = self.keys[self.names.index(asked["key"])] if self.names else asked["key"]
        lines = prompt.split("\n")
        value = re.escape(self.separator).join(["([" + re.escape(self.letters) + "])"] * self.width)
        entry = re.compile(rf"(?:^| ){re.escape(key)}{value}(?= |$)")
        for heading, register in itertools.pairwise(lines):
            found = entry.search(register) if heading == self.phrases.heading else None
            if found:
                return "".join(found.groups())
        return None


class RegisterParams(Params):
    """Parameters of a family with a tier-1 register: a subclass gives the register its own
    default wording (`lookup = lookup_field(heading, question)`)."""

    lookup: Register = Field(default_factory=Register, description="The tier-1 register.")


def lookup_field(heading: str, question: str) -> Any:
    """The `lookup` field of a family's parameters, with the family's own default wording."""
    phrases = RegisterPhrases(heading=heading, question=question)
    return Field(
        default_factory=lambda: Register(phrases=phrases),
        description="The tier-1 register (exam_builder/families/register.py): its size, "
        "separator, alphabets and wording.",
    )


P = TypeVar("P", bound=RegisterParams)
Generate = Callable[[random.Random, P, Lexicon], Document]
Solve = Callable[[str, P], str]


def with_register(generate: Generate[P], solve: Solve[P]) -> tuple[Generate[P], Solve[P]]:
    """A family's generate and solve with its tier-1 register beside its own documents: each
    document's tier is drawn by the bank's mix (`pick_tier`); tier 1 is a register, any other
    tier the family's own document, its questions marked with that tier. With no mix (the
    default) nothing is drawn and the family's documents are exactly as before: a bank that
    does not ask for tiers keeps its exam."""

    def tiered_generate(rng: random.Random, p: P, lex: Lexicon) -> Document:
        tier = pick_tier(rng, p)
        if tier == 1:
            return p.lookup.document(rng, p.questions)
        doc = generate(rng, p, lex)
        if tier is not None:  # the family's own tier, drawn by the mix: mark its questions
            doc.parts = [replace(a, tier=tier) if isinstance(a, Answer) else a for a in doc.parts]
        return doc

    def tiered_solve(prompt: str, p: P) -> str:
        found = p.lookup.answer(prompt)
        return found if found is not None else solve(prompt, p)

    return tiered_generate, tiered_solve
