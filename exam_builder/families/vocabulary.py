"""Local vocabularies: invented words defined in the prompt, then used.

    A short glossary of Velmish (plurals add -ot):
      mork means water
      tavi means stone
    In Velmish, "stone water" is tavi mork.
    In Velmish, "stones" is taviot.

The answer is a phrase translated word by word with the glossary and the plural rule of this
prompt: no outside knowledge helps. A phrase has two words or more (a one-word phrase is a
plural), so that no answer is a glossary word copied: a blind pick among the glossary's words
would find those. The English meanings and the phrases are bank parameters.
"""

from __future__ import annotations

import random
import re
from typing import ClassVar

from pydantic import Field, field_validator

from exam_builder.document import Document
from exam_builder.families.base import Family, SolveError, distinct, last_line
from exam_builder.families.phrasing import Phrases, template_regex
from exam_builder.families.register import Register, RegisterParams, lookup_field, with_register
from exam_builder.lexicon import Lexicon

DEFAULT_MEANINGS = (  # noqa: SIM905 (a list of 30 words reads better as one string)
    "water stone fire cloud river bird tree road house door rope boat lamp hill star field "
    "horse coat bell wall cup knife moon seed leaf ship shell coin drum nail"
).split()


class VocabularyPhrases(Phrases):
    """Wording; {rule} in the heading is where `plural_rule` goes (or nothing)."""

    SLOTS: ClassVar[dict[str, tuple[str, ...]]] = {
        "heading": ("language", "rule"),
        "plural_rule": ("suffix",),
        "entry": ("word", "meaning"),
        "query": ("language", "phrase"),
    }
    heading: str = "A short glossary of {language}{rule}:"
    plural_rule: str = " (plurals add -{suffix})"
    entry: str = "  {word} means {meaning}"
    query: str = 'In {language}, "{phrase}" is '


class VocabularyParams(RegisterParams):
    lookup: Register = lookup_field("Glosses", "gloss {key}")
    entries: int = Field(default=6, ge=2, le=16, description="Glossary entries per document.")
    phrase_words: int = Field(default=2, ge=1, le=4, description="Most words in one phrase.")
    plurals: bool = Field(default=True, description="Define a plural suffix and use it.")
    meanings: list[str] = Field(
        default_factory=lambda: list(DEFAULT_MEANINGS),
        description="English nouns to define (lowercase; plural = noun + 's').",
    )
    phrases: VocabularyPhrases = Field(default_factory=VocabularyPhrases, description="Wording.")

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
    say = p.phrases
    doc = Document()
    rule = say.plural_rule.format(suffix=suffix) if p.plurals else ""
    doc.say(say.heading.format(language=language, rule=rule) + "\n")
    for m in meanings:
        doc.say(say.entry.format(word=glossary[m], meaning=m) + "\n")

    def draw() -> tuple[str, str]:
        n = rng.randint(min(2, p.phrase_words), min(p.phrase_words, len(meanings)))
        english, native = [], []
        for m in rng.sample(meanings, n):
            # A one-word phrase is always a plural: a bare entry word is a copy of the glossary.
            plural = p.plurals and (n == 1 or rng.random() < 0.4)
            english.append(m + "s" if plural else m)
            native.append(glossary[m] + suffix if plural else glossary[m])
        return say.query.format(language=language, phrase=" ".join(english)), " ".join(native)

    for question, answer in distinct(draw, p.questions):
        doc.say(question)
        doc.ask(answer)
        doc.say(".\n")
    return doc


_SLOTS = {
    "word": r"[a-z]+",
    "meaning": r"[a-z]+",
    "suffix": r"[a-z]+",
    "language": r"[A-Za-z]+",
    "phrase": r"[a-z ]+",
}


def solve(prompt: str, p: VocabularyParams) -> str:
    say = p.phrases
    entry = template_regex(say.entry, **_SLOTS)
    glossary = {m["meaning"]: m["word"] for m in re.finditer(f"^{entry}$", prompt, re.M)}
    rule = re.search(template_regex(say.plural_rule, **_SLOTS), prompt) if p.plurals else None
    m = re.fullmatch(template_regex(say.query, **_SLOTS), last_line(prompt))
    if not m:
        raise SolveError("no phrase to translate")
    out = []
    for word in m["phrase"].split():
        if word in glossary:
            out.append(glossary[word])
        elif rule and word.endswith("s") and word[:-1] in glossary:
            out.append(glossary[word[:-1]] + rule["suffix"])
        else:
            raise SolveError(f"{word!r} is not in the glossary")
    return " ".join(out)


_generate, _solve = with_register(generate, solve)

FAMILY = Family(
    name="vocabulary",
    params=VocabularyParams,
    generate=_generate,
    solve=_solve,
    tiers=(3, 1),
    description="invented words defined in the prompt, then used",
)
