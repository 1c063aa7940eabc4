"""Ledger: composition. Opening counts, then hand-overs between people; a question asks what a
person holds at the end, so the answer is a sum that no sentence of the prompt states."""

import re

from pydantic import Field

from exam_builder.document import Document
from exam_builder.families.base import Family, Params, SolveError, last_line


class LedgerParams(Params):
    people: int = Field(default=3, ge=2, le=5, description="People in a document.")
    moves: int = Field(default=6, ge=1, le=12, description="Hand-overs in a document.")


def generate(rng, params, lexicon):
    people = lexicon.names(params.people)
    held = {x: rng.randint(120, 480) for x in people}
    lines = [f"{x} opened with {held[x]} beads." for x in people]
    for _ in range(params.moves):
        giver, taker = rng.sample(people, 2)
        n = rng.randint(11, 89)
        held[giver] -= n
        held[taker] += n
        lines.append(f"{giver} handed {n} beads to {taker}.")
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
    for giver, n, taker in re.findall(r"(\w+) handed (\d+) beads to (\w+)\.", prompt):
        total += int(n) * ((taker == x) - (giver == x))
    return str(total)


FAMILY = Family("ledger", LedgerParams, generate, solve, "composition: a running count")
