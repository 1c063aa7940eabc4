"""Ledger: composition. Opening counts, then hand-overs between people; a question asks what a
person holds at the end, so the answer is a sum that no sentence of the prompt states. Who gives
and who receives is said by the verb, in several wordings, never by "to"/"from" alone (where a
preposition appears it points either way), so a rule that adds what goes "to" a name and
takes away what comes "from" one keeps the wrong sign."""

import re

from pydantic import Field

from exam_builder.document import Document
from exam_builder.families.base import Family, Params, SolveError, last_line

# The giver is {g}, the taker {t}.
MOVES = [
    "{g} paid {t} {n} beads.",
    "{t} was paid {n} beads by {g}.",
    "{g} lent {t} {n} beads.",
    "{t} took {n} beads off {g}.",
    "{t} went to {g} and came back {n} beads richer.",
    "{g} was {n} beads poorer after meeting {t}.",
]
_MOVE_RE = [
    re.compile(
        re.escape(m)
        .replace(r"\{g\}", r"(?P<g>\w+)")
        .replace(r"\{t\}", r"(?P<t>\w+)")
        .replace(r"\{n\}", r"(?P<n>\d+)")
    )
    for m in MOVES
]


class LedgerParams(Params):
    people: int = Field(default=3, ge=2, le=5, description="People in a document.")
    moves: int = Field(default=12, ge=1, le=12, description="Hand-overs in a document.")


def generate(rng, params, lexicon):
    people = lexicon.names(params.people)
    held = {x: rng.randint(1200, 4800) for x in people}
    lines = [f"{x} opened with {held[x]} beads." for x in people]
    for _ in range(params.moves):
        giver, taker = rng.sample(people, 2)
        n = rng.randint(110, 890)
        held[giver] -= n
        held[taker] += n
        lines.append(rng.choice(MOVES).format(g=giver, t=taker, n=n))
    doc = Document()
    doc.say(" ".join(lines) + "\n")
    for x in rng.sample(people, min(params.questions, len(people))):
        doc.say(f"Beads now held by {x}: ")
        doc.ask(str(held[x]))
        doc.say("\n")
    return doc


def solve(prompt, params):
    asked = re.fullmatch(r"Beads now held by (\w+): ", last_line(prompt))
    if not asked:
        raise SolveError("not a ledger question")
    x = asked[1]
    total = int(re.search(rf"\b{x} opened with (\d+) beads\.", prompt)[1])
    for sentence in re.split(r"(?<=\.) ", prompt.split("\n")[0]):
        for pattern in _MOVE_RE:
            m = pattern.fullmatch(sentence)
            if m:
                total += int(m["n"]) * ((m["t"] == x) - (m["g"] == x))
                break
    return str(total)


FAMILY = Family("ledger", LedgerParams, generate, solve, "composition: a running count", tiers=(3,))
