"""Mentors: two hops. Who trained whom and where each settled, shuffled together; a question
names a person and asks where that person's teacher settled, so the answer composes two
facts, and every person has a town of their own (the one-hop answer is always a distractor)."""

import re

from pydantic import Field

from exam_builder.document import Document
from exam_builder.families.base import Family, Params, SolveError, last_line


class MentorsParams(Params):
    people: int = Field(default=5, ge=3, le=8, description="People in a document.")


def generate(rng, params, lexicon):
    people = lexicon.names(params.people)
    town = {x: lexicon.name() for x in people}
    teacher = {x: rng.choice([y for y in people if y != x]) for x in people}
    facts = [f"{x} trained under {teacher[x]}." for x in people]
    facts += [f"{x} settled in {town[x]}." for x in people]
    rng.shuffle(facts)
    doc = Document()
    doc.say(" ".join(facts) + "\n")
    for x in rng.sample(people, min(params.questions, len(people))):
        doc.say(f"Home town of the teacher of {x}: ")
        doc.ask(town[teacher[x]])
        doc.say("\n")
    return doc


def solve(prompt, params):
    asked = re.fullmatch(r"Home town of the teacher of (\w+): ", last_line(prompt))
    if not asked:
        raise SolveError("not a mentors question")
    teacher = re.search(rf"\b{asked[1]} trained under (\w+)\.", prompt)[1]
    return re.search(rf"\b{teacher} settled in (\w+)\.", prompt)[1]


FAMILY = Family("mentors", MentorsParams, generate, solve, "two hops: a teacher's town")
