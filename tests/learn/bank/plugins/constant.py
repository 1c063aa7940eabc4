"""Test family: every answer is the same word, so a model learns it in a few steps."""

import re

from exam_builder.document import Document
from exam_builder.families.base import Family, Params, last_line

WORD = "velkor"


def generate(rng, params, lexicon):
    doc = Document()
    doc.say(f"Gate of {lexicon.name()}, keeper {lexicon.name()}.\n")
    for _ in range(params.questions):
        doc.say(f"Watchword at {lexicon.name()}: ")
        doc.ask(WORD)
        doc.say("\n")
    return doc


def solve(prompt, params):
    if not re.fullmatch(r"Watchword at [A-Z][a-z]+: ", last_line(prompt)):
        raise ValueError("not a watchword question")
    return WORD


FAMILY = Family("constant", Params, generate, solve, "a constant answer", tiers=(1,))
