"""Extraction: copy one field out of two of several messages.

    Message 1
    From: Orvak Tellis <orvak@kelmo.vesk>
    Sent: 2031-04-17 08:15
    Ref: KX-4821
    Subject: zimbar for Dessa
    ...
    Where message 1 has KX-4821, messages 3 and 2 have: ZT-1190 and LM-5532.

The question never names the field: it shows the value one message has there, so the field is
found by that value (a rule that maps the question's words to a field, such as "address" or
"sent", has nothing to read). The answer joins the field of two other messages (`both`), in
the order asked, so it is written nowhere in the prompt and a blind pick among the prompt's
values of its shape scores nothing. Sizes, address domains and the wording are bank
parameters.
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

_MESSAGE = re.compile(
    r"^Message (\d+)\nFrom: ([A-Z][a-z]+ [A-Z][a-z]+) <([a-z.@]+)>\nSent: ([-\d: ]+)\n"
    r"Ref: ([A-Z]{2}-\d{4})\nSubject: ([a-z ]+)$",
    re.M,
)


class ExtractionPhrases(Phrases):
    """Question wording; {key}, {first} and {second} are message numbers, {value} the key
    message's field; `both` joins the answer's two fields."""

    SLOTS: ClassVar[dict[str, tuple[str, ...]]] = {
        "question": ("key", "value", "first", "second"),
        "both": ("one", "two"),
    }
    question: str = "Where message {key} has {value}, messages {first} and {second} have: "
    both: str = "{one} and {two}"


class ExtractionParams(RegisterParams):
    lookup: Register = lookup_field("Marks", "mark {key}")
    messages: int = Field(default=4, ge=3, le=6, description="Messages in the document.")
    domains: list[str] = Field(
        default_factory=lambda: ["vesk", "orb", "tarn", "mul"],
        min_length=1,
        description="Top-level domains of invented addresses (lowercase).",
    )
    years: tuple[int, int] = Field(default=(2031, 2089), description="Range of the Sent year.")
    phrases: ExtractionPhrases = Field(default_factory=ExtractionPhrases, description="Wording.")

    @field_validator("domains")
    @classmethod
    def _domains(cls, v: list[str]) -> list[str]:
        bad = [d for d in v if not re.fullmatch(r"[a-z]+", d)]
        if bad:
            raise ValueError(f"domains must be lowercase words: {bad[:3]}")
        return v


def generate(rng: random.Random, p: ExtractionParams, lex: Lexicon) -> Document:
    msgs = []
    refs: set[str] = set()
    for i in range(1, p.messages + 1):
        first, last = lex.name(), lex.name()
        address = f"{first.lower()}@{lex.word()}.{rng.choice(p.domains)}"
        sent = (
            f"{rng.randint(*p.years)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} "
            f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}"
        )
        while True:
            ref = "".join(rng.choice("BCDFGHKLMNPRSTVXZ") for _ in range(2))
            ref += f"-{rng.randint(1000, 9999)}"
            if ref not in refs:
                refs.add(ref)
                break
        subject = f"{lex.word()} for {lex.name()}".lower()
        msgs.append((str(i), f"{first} {last}", address, sent, ref, subject))
    doc = Document()
    for num, sender, address, sent, ref, subject in msgs:
        doc.say(f"Message {num}\nFrom: {sender} <{address}>\nSent: {sent}\n")
        doc.say(f"Ref: {ref}\nSubject: {subject}\n\n")

    say = p.phrases

    def draw() -> tuple[str, str]:
        key, first, second = rng.sample(msgs, 3)
        field = rng.randrange(1, len(key))  # sender, address, sent, ref or subject
        question = say.question.format(
            key=key[0], value=key[field], first=first[0], second=second[0]
        )
        return question, say.both.format(one=first[field], two=second[field])

    for question, answer in distinct(draw, p.questions):
        doc.say(question)
        doc.ask(answer)
        doc.say(".\n")
    return doc


def solve(prompt: str, p: ExtractionParams) -> str:
    by_num = {m[0]: m for m in _MESSAGE.findall(prompt)}
    q = last_line(prompt)
    say = p.phrases
    slots = {"key": r"\d+", "first": r"\d+", "second": r"\d+", "value": r".+"}
    m = re.fullmatch(template_regex(say.question, **slots), q)
    if not m or not {m["key"], m["first"], m["second"]} <= set(by_num):
        raise SolveError(f"not an extraction question: {q!r}")
    key = by_num[m["key"]]
    if m["value"] not in key[1:]:
        raise SolveError(f"message {m['key']} has no field {m['value']!r}")
    field = key.index(m["value"], 1)
    return say.both.format(one=by_num[m["first"]][field], two=by_num[m["second"]][field])


_generate, _solve = with_register(generate, solve)

FAMILY = Family(
    name="extraction",
    params=ExtractionParams,
    generate=_generate,
    solve=_solve,
    tiers=(2, 1),
    description="copy a field out of the right message",
)
