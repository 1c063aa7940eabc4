# The built-in family schedules as it was before issue 28 (exam_builder 1.1.0), kept for the tests:
# its answers are values of the prompt, which a blind guesser or a rule reads.
"""Schedules: a timetable of departures and journey times; arrivals must be computed.

    Timetable of the Orvel ferries (24-hour clock):
      Tamsik leaves 08:15, journey 45 min
      Velor leaves 09:40, journey 80 min
    The Tamsik arrives at 09:00.
    The first ferry to leave after 09:00 is the Velor.
    The Velor leaves at 09:40.

Arrivals are departure + journey (clock arithmetic defined by the prompt), "first after" needs
the order of times, and look-ups copy a time. Vehicles, sizes and phrases are bank parameters.
"""

from __future__ import annotations

import random
import re
from typing import ClassVar

from pydantic import Field, model_validator

from exam_builder.document import Document
from exam_builder.families.base import Family, Params, SolveError, distinct, last_line
from exam_builder.families.phrasing import Phrases, template_regex
from exam_builder.lexicon import Lexicon


class SchedulesPhrases(Phrases):
    """Wording; {name} is a departure, {time} a clock time, {vehicles} the plural vehicle."""

    SLOTS: ClassVar[dict[str, tuple[str, ...]]] = {
        "title": ("place", "vehicles"),
        "line": ("name", "time", "minutes"),
        "arrives": ("name",),
        "leaves": ("name",),
        "after": ("vehicle", "time"),
    }
    title: str = "Timetable of the {place} {vehicles} (24-hour clock):"
    line: str = "  {name} leaves {time}, journey {minutes} min"
    arrives: str = "The {name} arrives at "
    leaves: str = "The {name} leaves at "
    after: str = "The first {vehicle} to leave after {time} is the "


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
    phrases: SchedulesPhrases = Field(default_factory=SchedulesPhrases, description="Wording.")

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
    say = p.phrases
    doc = Document()
    doc.say(say.title.format(place=lex.name(), vehicles=_plural(vehicle)) + "\n")
    for n, s, j in zip(names, starts, journeys, strict=True):
        doc.say(say.line.format(name=n, time=_clock(s), minutes=j) + "\n")

    def draw() -> tuple[str, str]:
        k = rng.randrange(len(names))
        kind = rng.choice(["arrives", "arrives", "after", "leaves"])
        later = [s for s in starts if s > starts[k]]
        if kind == "after" and later:
            question = say.after.format(vehicle=vehicle, time=_clock(starts[k]))
            return question, names[starts.index(min(later))]
        if kind == "leaves":
            return say.leaves.format(name=names[k]), _clock(starts[k])
        return say.arrives.format(name=names[k]), _clock(starts[k] + journeys[k])

    for question, answer in distinct(draw, p.questions):
        doc.say(question)
        doc.ask(answer)
        doc.say(".\n")
    return doc


_SLOTS = {"name": r"[A-Z][a-z]+", "time": r"\d\d:\d\d", "minutes": r"\d+", "vehicle": r"[a-z]+"}


def solve(prompt: str, p: SchedulesParams) -> str:
    say = p.phrases
    line = template_regex(say.line, **_SLOTS)
    table = {
        m["name"]: (_minutes(m["time"]), int(m["minutes"]))
        for m in re.finditer(f"^{line}$", prompt, re.M)
    }
    question = last_line(prompt)
    if m := re.fullmatch(template_regex(say.arrives, **_SLOTS), question):
        start, journey = table[m["name"]]
        return _clock(start + journey)
    if m := re.fullmatch(template_regex(say.leaves, **_SLOTS), question):
        return _clock(table[m["name"]][0])
    if m := re.fullmatch(template_regex(say.after, **_SLOTS), question):
        after = _minutes(m["time"])
        return min((t, name) for name, (t, _) in table.items() if t > after)[1]
    raise SolveError(f"not a timetable question: {question!r}")


FAMILY = Family(
    name="old_schedules",
    params=SchedulesParams,
    generate=generate,
    solve=solve,
    description="timetables and journey times, arrivals computed",
)
