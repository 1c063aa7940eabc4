"""Passages: facts stated in a short invented text, then asked about two at a time.

    In Dorvask there were three neighbours. Talmi lives in Vosk. Talmi keeps a pet named
    Murbel. Keshan lives in Ildor. ...
    Q: Where is Talmi's home? What does Keshan call the animal at home? A: Vosk and Murbel.

Several people share the same relations, so an answer needs the right person bound to the
right fact. Every question asks two facts and its answer joins them (`both`): the answer is
written nowhere in the passage, so a blind pick among the passage's names scores nothing, and
a rule that copies one name beside the asked person is never right. The default questions share
no word with their facts but the person's name (a question that repeats its fact's verb is read
by a rule that matches words). Relations are bank parameters (a statement and a question
template each).
"""

from __future__ import annotations

import random
import re

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from exam_builder.document import Document
from exam_builder.families.base import Family, SolveError, last_line
from exam_builder.families.phrasing import check_template, template_regex
from exam_builder.families.register import Register, RegisterParams, lookup_field, with_register
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
    Relation(fact="{a} lives in {b}.", question="Where is {a}'s home?"),
    Relation(fact="{a} keeps a pet named {b}.", question="What does {a} call the animal at home?"),
    Relation(fact="{a} works as a {b} maker.", question="Which trade is {a}'s?"),
    Relation(fact="The boat of {a} is called {b}.", question="Which vessel belongs to {a}?"),
    Relation(fact="{a} was born in the month of {b}.", question="When is {a}'s birthday?"),
    Relation(fact="{a} always sings the song {b}.", question="What tune does {a} hum?"),
]


class PassagesParams(RegisterParams):
    lookup: Register = lookup_field("Notes", "note {key}")
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
        description="How a question is put; {question} is two relations' questions, a space "
        "between them.",
    )
    both: str = Field(
        default="{first} and {second}",
        description="How the answer joins the two facts asked, in the order asked.",
    )

    @field_validator("ask")
    @classmethod
    def _ask(cls, v: str) -> str:
        return check_template(v, "question")

    @field_validator("both")
    @classmethod
    def _both(cls, v: str) -> str:
        check_template(v, "first", "second")
        if not v.startswith("{first}") or not v.endswith("{second}"):
            raise ValueError(f"{v!r} must start with {{first}} and end with {{second}}")
        return v

    @model_validator(mode="after")
    def _two_facts(self) -> PassagesParams:
        if self.people * min(self.facts_per_person, len(self.relations)) < 2:
            raise ValueError("a question asks two facts: people x facts_per_person must be >= 2")
        return self

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
    pairs = [(x, y) for x in facts for y in facts if x is not y]
    for first, second in rng.sample(pairs, min(p.questions, len(pairs))):
        asked = " ".join(rel.question.format(a=a) for a, rel, _ in (first, second))
        doc.say(p.ask.format(question=asked))
        doc.ask(p.both.format(first=first[2], second=second[2]))
        doc.say(".\n")
    return doc


def _fact(prompt: str, rel: Relation, person: str) -> str | None:
    found = re.search(template_regex(rel.fact, a=re.escape(person), b=r"[A-Z][a-z]+"), prompt)
    return found["b"] if found else None


def solve(prompt: str, p: PassagesParams) -> str:
    question = last_line(prompt)
    name = r"[A-Z][a-z]+"
    for one in p.relations:
        for two in p.relations:
            first = template_regex(one.question, a=name).replace("(?P<a>", "(?P<x>")
            second = template_regex(two.question, a=name).replace("(?P<a>", "(?P<y>")
            m = re.fullmatch(template_regex(p.ask, question=".+"), question)
            asked = m and re.fullmatch(f"{first} {second}", m["question"])
            if not asked:
                continue
            b1, b2 = _fact(prompt, one, asked["x"]), _fact(prompt, two, asked["y"])
            if b1 and b2:
                return p.both.format(first=b1, second=b2)
    raise SolveError(f"no stated facts answer {question!r}")


_generate, _solve = with_register(generate, solve)

FAMILY = Family(
    name="passages",
    params=PassagesParams,
    generate=_generate,
    solve=_solve,
    tiers=(2, 1),
    description="facts stated in a short invented text",
)
