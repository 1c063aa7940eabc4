"""Test family: every answer is a hash of the question, determined by the prompt and learned by
no small model (the reference learner must score 0 on it)."""

import hashlib
import re

from exam_builder.document import Document
from exam_builder.families.base import Family, Params, last_line


def _digest(name):
    return hashlib.sha256(name.encode()).hexdigest()[:6]


def generate(rng, params, lexicon):
    doc = Document()
    doc.say(f"Seals of {lexicon.name()}.\n")
    for _ in range(params.questions):
        name = lexicon.name()
        doc.say(f"Seal of {name}: ")
        doc.ask(_digest(name))
        doc.say("\n")
    return doc


def solve(prompt, params):
    m = re.fullmatch(r"Seal of ([A-Z][a-z]+): ", last_line(prompt))
    if not m:
        raise ValueError("not a seal question")
    return _digest(m[1])


FAMILY = Family("hashed", Params, generate, solve, "a hashed answer", tiers=(1,))
