"""Local vocabularies: invented words defined in the prompt, then used.

    A short glossary of Velmish (plurals add -ot):
      mork means water
      tavi means stone
    In Velmish, "stone water" is tavi mork.
    In Velmish, "stones" is taviot.

The answer is a phrase translated word by word with the glossary and the plural rule of this
prompt: no outside knowledge helps. The English meanings are a bank parameter.
"""

from __future__ import annotations

import random
import re

from pydantic import Field, field_validator

from exam_builder.document import Document
from exam_builder.families.base import Family, Params, SolveError, distinct, last_line
from exam_builder.lexicon import Lexicon

DEFAULT_MEANINGS = [
    "water",
    "stone",
    "fire",
    "cloud",
    "river",
    "bird",
    "tree",
    "road",
    "house",
    "door",
    "rope",
    "boat",
    "lamp",
    "hill",
    "star",
    "field",
    "horse",
    "coat",
    "bell",
    "wall",
    "cup",
    "knife",
    "moon",
    "seed",
    "leaf",
    "ship",
    "shell",
    "coin",
    "drum",
    "nail",
]


class VocabularyParams(Params):
    entries: int = Field(default=6, ge=2, le=16, description="Glossary entries per document.")
    phrase_words: int = Field(default=2, ge=1, le=4, description="Most words in one phrase.")
    plurals: bool = Field(default=True, description="Define a plural suffix and use it.")
    meanings: list[str] = Field(
        default_factory=lambda: list(DEFAULT_MEANINGS),
        description="English nouns to define (lowercase; plural = noun + 's').",
    )

    @field_validator("meanings")
    @classmethod
    def _meanings(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v) or len(v) < 2:
            raise ValueError("needs at least 2 distinct nouns")
        bad = [m for m in v if not re.fullmatch(r"[a-z]+", m) or m.endswith("s")]
        if bad:
            raise ValueError(f"nouns must be lowercase letters, not ending in 's': {bad[:3]}")
        return v


def generate(rng: random.Random, p: VocabularyParams, lex: Lexicon) -> Document:
    meanings = rng.sample(p.meanings, min(p.entries, len(p.meanings)))
    glossary = {m: lex.word() for m in meanings}
    suffix = lex.word(1, 1, min_len=2) if p.plurals else ""
    language = lex.name() + "ish"
    doc = Document()
    rule = f" (plurals add -{suffix})" if p.plurals else ""
    doc.say(f"A short glossary of {language}{rule}:\n")
    for m in meanings:
        doc.say(f"  {glossary[m]} means {m}\n")

    def draw() -> tuple[str, str]:
        n = rng.randint(1, min(p.phrase_words, len(meanings)))
        english, native = [], []
        for m in rng.sample(meanings, n):
            plural = p.plurals and rng.random() < 0.4
            english.append(m + "s" if plural else m)
            native.append(glossary[m] + suffix if plural else glossary[m])
        return f'In {language}, "{" ".join(english)}" is ', " ".join(native)

    for question, answer in distinct(draw, p.questions):
        doc.say(question)
        doc.ask(answer)
        doc.say(".\n")
    return doc


def solve(prompt: str, p: VocabularyParams) -> str:
    glossary = dict((m, w) for w, m in re.findall(r"^  ([a-z]+) means ([a-z]+)$", prompt, re.M))
    rule = re.search(r" \(plurals add -([a-z]+)\):$", prompt, re.M)
    m = re.fullmatch(r'In [A-Za-z]+, "([a-z ]+)" is ', last_line(prompt))
    if not m:
        raise SolveError("no phrase to translate")
    out = []
    for word in m.group(1).split():
        if word in glossary:
            out.append(glossary[word])
        elif rule and word.endswith("s") and word[:-1] in glossary:
            out.append(glossary[word[:-1]] + rule.group(1))
        else:
            raise SolveError(f"{word!r} is not in the glossary")
    return " ".join(out)


FAMILY = Family(
    name="vocabulary",
    params=VocabularyParams,
    generate=generate,
    solve=solve,
    description="invented words defined in the prompt, then used",
)
