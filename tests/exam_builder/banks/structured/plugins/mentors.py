"""Mentors: two hops, and an answer no sentence states. Who taught whom, when each was born,
and who crossed whom, shuffled together; a question names a person and asks how many years
separate that person's birth from their teacher's, so the answer is computed from two facts
found through a relation. The relation is never marked by one fixed verb or direction (the
teacher comes first in some sentences, second in others), and every person is named beside
several others (rivals, correspondents), so neither a walk along one verb nor a pick among the
people named with the asked one finds the teacher; no number of the prompt is an answer."""

import re

from pydantic import Field

from exam_builder.document import Document
from exam_builder.families.base import Family, Params, SolveError, last_line

# (template, teacher first?): one relation, several wordings and both directions.
TAUGHT = [
    ("{s} trained under {t}.", False),
    ("{t} took {s} as an apprentice.", True),
    ("It was {t} who schooled {s}.", True),
    ("{s} learnt the trade from {t}.", False),
]
OTHER = ["{a} quarrelled with {b}.", "{a} wrote often to {b}.", "{a} and {b} shared a bench."]
BORN = ["{x} was born in {y}.", "{x} (b. {y})."]


class MentorsParams(Params):
    people: int = Field(default=6, ge=4, le=8, description="People in a document.")
    others: int = Field(default=6, ge=0, le=12, description="Distracting relations.")


def generate(rng, params, lexicon):
    people = lexicon.names(params.people)
    years = rng.sample(range(5000, 6000), len(people))  # no gap is a prefix of a year
    born = dict(zip(people, years, strict=True))
    teacher = {x: rng.choice([y for y in people if y != x]) for x in people}
    facts = [rng.choice(BORN).format(x=x, y=born[x]) for x in people]
    for s in people:
        template, _ = rng.choice(TAUGHT)
        facts.append(template.format(s=s, t=teacher[s]))
    for _ in range(params.others):
        a, b = rng.sample(people, 2)
        facts.append(rng.choice(OTHER).format(a=a, b=b))
    rng.shuffle(facts)
    doc = Document()
    doc.say(" ".join(facts) + "\n")
    for x in rng.sample(people, min(params.questions, len(people))):
        doc.say(f"Years between the births of {x} and of {x}'s teacher: ")
        doc.ask(str(abs(born[x] - born[teacher[x]])))
        doc.say("\n")
    return doc


def solve(prompt, params):
    asked = re.fullmatch(
        r"Years between the births of (\w+) and of \1's teacher: ", last_line(prompt)
    )
    if not asked:
        raise SolveError("not a mentors question")
    x = asked[1]
    teacher = None
    for template, teacher_first in TAUGHT:
        if teacher_first:
            pattern = (
                re.escape(template).replace(r"\{t\}", r"(\w+)").replace(r"\{s\}", re.escape(x))
            )
        else:
            pattern = (
                re.escape(template).replace(r"\{s\}", re.escape(x)).replace(r"\{t\}", r"(\w+)")
            )
        found = re.search(rf"(?<!\w){pattern}", prompt)
        if found:
            teacher = found[1]
            break
    if teacher is None:
        raise SolveError(f"no teacher of {x}")

    def year(who):
        for template in BORN:
            pattern = (
                re.escape(template).replace(r"\{x\}", re.escape(who)).replace(r"\{y\}", r"(\d+)")
            )
            found = re.search(rf"(?<!\w){pattern}", prompt)
            if found:
                return int(found[1])
        raise SolveError(f"no birth year of {who}")

    return str(abs(year(x) - year(teacher)))


FAMILY = Family(
    "mentors", MentorsParams, generate, solve, "two hops: years between a person and their teacher"
)
