"""Schedules: a timetable of departures and journey times; arrivals must be computed.

    Timetable of the Orvel ferries (24-hour clock):
      Tamsik leaves 08:15, journey 45 min
      Velor leaves 09:40, journey 80 min
    The Tamsik arrives at 09:00.
    The first ferry to leave after 09:00 is the Velor.
    The Velor leaves at 09:40.

Arrivals are departure + journey (clock arithmetic defined by the prompt), "first after" needs
the order of times, and look-ups copy a time. Vehicles and sizes are bank parameters.
"""

from __future__ import annotations

import random
import re

from pydantic import Field, model_validator

from exam_builder.document import Document
from exam_builder.families.base import Family, Params, SolveError, distinct, last_line
from exam_builder.lexicon import Lexicon


class SchedulesParams(Params):
    departures: int = Field(default=4, ge=2, le=10, description="Lines in the timetable.")
    vehicles: list[str] = Field(
        default_factory=lambda: ["ferry", "coach", "barge", "tram", "sled"],
        min_length=1,
        description="What departs (a lowercase word; the title adds 's' or 'es').",
    )
    first_hour: int = Field(default=5, ge=0, le=22, description="Earliest departure hour.")
    last_hour: int = Field(default=17, ge=0, le=22, description="Latest departure hour.")
    longest_journey: int = Field(default=300, ge=10, le=360, description="Minutes, at most.")

    @model_validator(mode="after")
    def _hours(self) -> SchedulesParams:
        if self.first_hour > self.last_hour:
            raise ValueError("first_hour must not be after last_hour")
        if self.last_hour * 60 + 55 + self.longest_journey >= 24 * 60:
            raise ValueError("last_hour + longest_journey must arrive before midnight")
        bad = [v for v in self.vehicles if not re.fullmatch(r"[a-z]+", v)]
        if bad:
            raise ValueError(f"vehicles must be lowercase words: {bad[:3]}")
        return self


def _clock(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def _minutes(clock: str) -> int:
    hours, mins = clock.split(":")
    return int(hours) * 60 + int(mins)


def _plural(word: str) -> str:
    return word + "es" if word.endswith(("s", "sh", "ch", "x")) else word + "s"


def generate(rng: random.Random, p: SchedulesParams, lex: Lexicon) -> Document:
    names = lex.names(p.departures)
    slots = range(p.first_hour * 12, p.last_hour * 12 + 12)  # 5-minute slots
    starts = sorted(5 * s for s in rng.sample(slots, p.departures))
    rng.shuffle(starts)
    journeys = [5 * rng.randint(2, p.longest_journey // 5) for _ in names]
    vehicle = rng.choice(p.vehicles)
    doc = Document()
    doc.say(f"Timetable of the {lex.name()} {_plural(vehicle)} (24-hour clock):\n")
    for n, s, j in zip(names, starts, journeys, strict=True):
        doc.say(f"  {n} leaves {_clock(s)}, journey {j} min\n")

    def draw() -> tuple[str, str]:
        k = rng.randrange(len(names))
        kind = rng.choice(["arrives", "arrives", "after", "leaves"])
        later = [s for s in starts if s > starts[k]]
        if kind == "after" and later:
            question = f"The first {vehicle} to leave after {_clock(starts[k])} is the "
            return question, names[starts.index(min(later))]
        if kind == "leaves":
            return f"The {names[k]} leaves at ", _clock(starts[k])
        return f"The {names[k]} arrives at ", _clock(starts[k] + journeys[k])

    for question, answer in distinct(draw, p.questions):
        doc.say(question)
        doc.ask(answer)
        doc.say(".\n")
    return doc


def solve(prompt: str, p: SchedulesParams) -> str:
    rows: list[tuple[str, str, str]] = re.findall(
        r"^  ([A-Z][a-z]+) leaves (\d\d:\d\d), journey (\d+) min$", prompt, re.M
    )
    table = {name: (_minutes(t), int(j)) for name, t, j in rows}
    question = last_line(prompt)
    if m := re.fullmatch(r"The ([A-Z][a-z]+) arrives at ", question):
        start, journey = table[m.group(1)]
        return _clock(start + journey)
    if m := re.fullmatch(r"The ([A-Z][a-z]+) leaves at ", question):
        return _clock(table[m.group(1)][0])
    if m := re.fullmatch(r"The first [a-z]+ to leave after (\d\d:\d\d) is the ", question):
        after = _minutes(m.group(1))
        return min((t, name) for name, (t, _) in table.items() if t > after)[1]
    raise SolveError(f"not a timetable question: {question!r}")


FAMILY = Family(
    name="schedules",
    params=SchedulesParams,
    generate=generate,
    solve=solve,
    description="timetables and journey times, arrivals computed",
)
