"""Mentors: two hops, and an answer no sentence states. Who taught whom, when each was born, and
who crossed whom, shuffled together; a question names a person and asks how many years separate
the births of that person's teacher and of the teacher's own teacher, so the answer is computed
from two facts found through two hops of a relation, and neither fact is in a sentence that
names the person asked about. Each person has a second year (retirement), so that a difference
of two random years of the prompt is rarely the answer. The relation is never marked by one
fixed verb or direction (the teacher comes first in some sentences, second in others), and
every person is named beside several others (rivals, correspondents), so neither a walk along
one verb nor a pick among the people named with the asked one finds the teacher; no number of
the prompt is an answer."""

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
RETIRED = ["{x} retired in {y}.", "{x} stopped teaching in {y}."]  # years that are not births


class MentorsParams(Params):
    people: int = Field(default=7, ge=4, le=8, description="People in a document.")
    others: int = Field(default=3, ge=0, le=12, description="Distracting relations.")


def generate(rng, params, lexicon):
    people = lexicon.names(params.people)
    years = sorted(rng.sample(range(4000, 7000), len(people)))  # people[i] born years[i]
    born = dict(zip(people, years, strict=True))
    # Everyone but the eldest was taught by someone older: no cycles, the eldest untaught.
    teacher = {x: rng.choice(people[:i]) for i, x in enumerate(people) if i}
    facts = [rng.choice(BORN).format(x=x, y=born[x]) for x in people]
    facts += [rng.choice(RETIRED).format(x=x, y=born[x] + rng.randint(50, 80)) for x in people]
    for s, t in teacher.items():
        template, _ = rng.choice(TAUGHT)
        facts.append(template.format(s=s, t=t))
    for _ in range(params.others):
        a, b = rng.sample(people, 2)
        facts.append(rng.choice(OTHER).format(a=a, b=b))
    rng.shuffle(facts)
    doc = Document()
    doc.say(" ".join(facts) + "\n")
    askable = [x for x in people if teacher.get(x) in teacher]  # a teacher with a teacher
    for x in rng.sample(askable, min(params.questions, len(askable))):
        doc.say(f"Years from the birth of {x}'s teacher's teacher to that of {x}'s teacher: ")
        doc.ask(str(born[teacher[x]] - born[teacher[teacher[x]]]))
        doc.say("\n")
    return doc


def solve(prompt, params):
    asked = re.fullmatch(
        r"Years from the birth of (\w+)'s teacher's teacher to that of \1's teacher: ",
        last_line(prompt),
    )
    if not asked:
        raise SolveError("not a mentors question")
    first = teacher_of(prompt, asked[1])
    second = teacher_of(prompt, first)
    return str(year_of(prompt, first) - year_of(prompt, second))


def _fill(template, **slots):
    """A template as a regex: each {slot} either a literal name or a captured word."""
    out = re.escape(template)
    for slot, value in slots.items():
        out = out.replace(re.escape("{" + slot + "}"), value)
    return rf"(?<!\w){out}"


def teacher_of(prompt, x):
    for template, _ in TAUGHT:
        found = re.search(_fill(template, s=re.escape(x), t=r"(\w+)"), prompt)
        if found:
            return found[1]
    raise SolveError(f"no teacher of {x}")


def year_of(prompt, who):
    for template in BORN:
        found = re.search(_fill(template, x=re.escape(who), y=r"(\d+)"), prompt)
        if found:
            return int(found[1])
    raise SolveError(f"no birth year of {who}")


FAMILY = Family(
    "mentors",
    MentorsParams,
    generate,
    solve,
    "two hops: years between two teachers' births",
    tiers=(3,),  # two hops, then computed
)
