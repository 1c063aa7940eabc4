# The built-in family extraction as it was before issue 28 (exam_builder 1.1.0), kept for the tests:
# its answers are values of the prompt, which a blind guesser or a rule reads.
"""Extraction: copy a field out of one of several messages.

    Message 1
    From: Orvak Tellis <orvak@kelmo.vesk>
    Sent: 2031-04-17 08:15
    Ref: KX-4821
    Subject: zimbar for Dessa
    ...
    The Ref of the message from Orvak Tellis: KX-4821.
    The sender of the message with Ref KX-4821: Orvak Tellis.
    The address of the sender of message 2: orvak@kelmo.vesk.

The field must be found in the right message (by sender, by number or by Ref), so that copying
the nearest similar text is not enough. Sizes, address domains and question phrases are bank
parameters.
"""

from __future__ import annotations

import random
import re
from typing import ClassVar

from pydantic import Field, field_validator

from exam_builder.document import Document
from exam_builder.families.base import Family, Params, SolveError, distinct, last_line
from exam_builder.families.phrasing import Phrases, template_regex
from exam_builder.lexicon import Lexicon

_MESSAGE = re.compile(
    r"^Message (\d+)\nFrom: ([A-Z][a-z]+ [A-Z][a-z]+) <([a-z.@]+)>\nSent: ([-\d: ]+)\n"
    r"Ref: ([A-Z]{2}-\d{4})\nSubject: ([a-z ]+)$",
    re.M,
)


class ExtractionPhrases(Phrases):
    """Question wording; {sender} is a full name, {number} a message number, {ref} a Ref."""

    SLOTS: ClassVar[dict[str, tuple[str, ...]]] = {
        "ref_by_sender": ("sender",),
        "sender_by_ref": ("ref",),
        "address_by_number": ("number",),
        "subject_by_sender": ("sender",),
        "sent_by_number": ("number",),
    }
    ref_by_sender: str = "The Ref of the message from {sender}: "
    sender_by_ref: str = "The sender of the message with Ref {ref}: "
    address_by_number: str = "The address of the sender of message {number}: "
    subject_by_sender: str = "The subject of the message from {sender}: "
    sent_by_number: str = "When message {number} was sent: "


class ExtractionParams(Params):
    messages: int = Field(default=3, ge=1, le=6, description="Messages in the document.")
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
        num, sender, address, sent, ref, subject = rng.choice(msgs)
        kind = rng.randrange(5)
        if kind == 0:
            return say.ref_by_sender.format(sender=sender), ref
        if kind == 1:
            return say.sender_by_ref.format(ref=ref), sender
        if kind == 2:
            return say.address_by_number.format(number=num), address
        if kind == 3:
            return say.subject_by_sender.format(sender=sender), subject
        return say.sent_by_number.format(number=num), sent

    for question, answer in distinct(draw, p.questions):
        doc.say(question)
        doc.ask(answer)
        doc.say(".\n")
    return doc


def solve(prompt: str, p: ExtractionParams) -> str:
    msgs: list[tuple[str, ...]] = _MESSAGE.findall(prompt)
    q = last_line(prompt)
    by_sender: dict[str, tuple[str, ...]] = {m[1]: m for m in msgs}
    by_num = {m[0]: m for m in msgs}
    by_ref = {m[4]: m for m in msgs}
    say = p.phrases
    slots = {"sender": r"[A-Z][a-z]+ [A-Z][a-z]+", "ref": r"[A-Z]{2}-\d{4}", "number": r"\d+"}

    def match(template: str) -> re.Match[str] | None:
        return re.fullmatch(template_regex(template, **slots), q)

    if m := match(say.ref_by_sender):
        return by_sender[m["sender"]][4]
    if m := match(say.sender_by_ref):
        return by_ref[m["ref"]][1]
    if m := match(say.address_by_number):
        return by_num[m["number"]][2]
    if m := match(say.subject_by_sender):
        return by_sender[m["sender"]][5]
    if m := match(say.sent_by_number):
        return by_num[m["number"]][3]
    raise SolveError(f"not an extraction question: {q!r}")


FAMILY = Family(
    name="old_extraction",
    params=ExtractionParams,
    generate=generate,
    solve=solve,
    description="copy a field out of the right message",
)
