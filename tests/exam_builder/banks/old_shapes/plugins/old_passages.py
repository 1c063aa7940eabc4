# The built-in family passages as it was before issue 28 (exam_builder 1.1.0), kept for the tests:
# its answers are values of the prompt, which a blind guesser or a rule reads.
"""Passages: facts stated in a short invented text, then asked about.

    In Dorvask there were three neighbours. Talmi lives in Vosk. Talmi keeps a pet named
    Murbel. Keshan lives in Ildor. ...
    Q: Where does Talmi live? A: Vosk.

Several people share the same relations, so an answer needs the right person bound to the
right fact. Relations are bank parameters (a statement and a question template each).
"""

from __future__ import annotations

import random
import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

from exam_builder.document import Document
from exam_builder.families.base import Family, Params, SolveError, last_line
from exam_builder.families.phrasing import check_template, template_regex
from exam_builder.lexicon import Lexicon


class Relation(BaseModel):
    """A fact pattern: `fact` and `question` use {a} (the person) and `fact` also {b}."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    fact: str = Field(description="Statement, e.g. '{a} lives in {b}.'")
    question: str = Field(description="Question, e.g. 'Where does {a} live?'")

    @field_validator("fact")
    @classmethod
    def _fact_slots(cls, v: str) -> str:
        return check_template(v, "a", "b")

    @field_validator("question")
    @classmethod
    def _question_slots(cls, v: str) -> str:
        return check_template(v, "a")


DEFAULT_RELATIONS = [
    Relation(fact="{a} lives in {b}.", question="Where does {a} live?"),
    Relation(fact="{a} keeps a pet named {b}.", question="What is the name of {a}'s pet?"),
    Relation(fact="{a} works as a {b} maker.", question="What does {a} make?"),
    Relation(fact="The boat of {a} is called {b}.", question="What is {a}'s boat called?"),
    Relation(fact="{a} was born in the month of {b}.", question="In which month was {a} born?"),
    Relation(fact="{a} always sings the song {b}.", question="Which song does {a} sing?"),
]


class PassagesParams(Params):
    people: int = Field(default=3, ge=1, le=6, description="People in the passage.")
    facts_per_person: int = Field(default=2, ge=1, le=6, description="Facts told per person.")
    relations: list[Relation] = Field(
        default_factory=lambda: list(DEFAULT_RELATIONS), min_length=1, description="Fact patterns."
    )
    openings: list[str] = Field(
        default_factory=lambda: [
            "In {place} there were {n} neighbours.",
            "This is an old tale from {place}.",
            "The records of {place} say this.",
        ],
        min_length=1,
        description="First sentence; may use {place} and {n}.",
    )
    ask: str = Field(
        default="Q: {question} A: ",
        description="How a question is put; {question} is a relation's question.",
    )

    @field_validator("ask")
    @classmethod
    def _ask(cls, v: str) -> str:
        return check_template(v, "question")

    @field_validator("openings")
    @classmethod
    def _openings(cls, v: list[str]) -> list[str]:
        return [check_template(t, "place", "n") for t in v]


def generate(rng: random.Random, p: PassagesParams, lex: Lexicon) -> Document:
    people = lex.names(p.people)
    facts: list[tuple[str, Relation, str]] = []
    for person in people:
        k = min(p.facts_per_person, len(p.relations))
        for rel in rng.sample(p.relations, k):
            facts.append((person, rel, lex.name()))
    doc = Document()
    opening = rng.choice(p.openings).format(place=lex.name(), n=len(people))
    sentences = [rel.fact.format(a=a, b=b) for a, rel, b in facts]
    doc.say(opening + " " + " ".join(sentences) + "\n")
    for a, rel, b in rng.sample(facts, min(p.questions, len(facts))):
        doc.say(p.ask.format(question=rel.question.format(a=a)))
        doc.ask(b)
        doc.say(".\n")
    return doc


def solve(prompt: str, p: PassagesParams) -> str:
    question = last_line(prompt)
    for rel in p.relations:
        asked = template_regex(rel.question, a=r"[A-Z][a-z]+")
        m = re.fullmatch(template_regex(p.ask, question=asked), question)
        if not m:
            continue
        fact = template_regex(rel.fact, a=re.escape(m["a"]), b=r"[A-Z][a-z]+")
        found = re.search(fact, prompt)
        if found:
            return found["b"]
    raise SolveError(f"no stated fact answers {question!r}")


FAMILY = Family(
    name="old_passages",
    params=PassagesParams,
    generate=generate,
    solve=solve,
    description="facts stated in a short invented text",
)
