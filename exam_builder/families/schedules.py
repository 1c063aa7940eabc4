"""Schedules: a timetable of departures and of the legs between stops; arrivals computed.

    Timetable of the Orvel ferries (24-hour clock):
      Kesh to Pim: 34 min
      Orvel to Kesh: 47 min
      Pim to Dask: 21 min
      Tamsik leaves Orvel at 08:15 for Pim, calling at Kesh
      Velor leaves Dask at 09:40 for Kesh, calling at Pim
    The Tamsik reaches its last stop at 09:36.

An arrival is the departure plus the two legs of the route, each found in the legs table by
its two stops, either way round (clock arithmetic defined by the prompt). No line that names
the departure holds a duration, and the sum of two legs is rarely a number of the prompt, so
neither a rule that adds the minutes written beside a name nor a blind "a time plus a number
of the prompt" finds it.
Vehicles, sizes and phrases are bank parameters.
"""

from __future__ import annotations

import itertools
import random
import re
from typing import ClassVar

from pydantic import Field, model_validator

from exam_builder.document import Document
from exam_builder.families.base import Family, SolveError, last_line
from exam_builder.families.phrasing import Phrases, template_regex
from exam_builder.families.register import Register, RegisterParams, lookup_field, with_register
from exam_builder.lexicon import Lexicon


class SchedulesPhrases(Phrases):
    """Wording; {name} is a departure, {time} a clock time, {vehicles} the plural vehicle."""

    SLOTS: ClassVar[dict[str, tuple[str, ...]]] = {
        "title": ("place", "vehicles"),
        "leg": ("start", "end", "minutes"),
        "line": ("name", "origin", "time", "stop", "via"),
        "arrives": ("name",),
    }
    title: str = "Timetable of the {place} {vehicles} (24-hour clock):"
    leg: str = "  {start} to {end}: {minutes} min"
    line: str = "  {name} leaves {origin} at {time} for {stop}, calling at {via}"
    arrives: str = "The {name} reaches its last stop at "


class SchedulesParams(RegisterParams):
    lookup: Register = lookup_field("Gates", "gate {key}")
    departures: int = Field(default=4, ge=2, le=10, description="Departures in the timetable.")
    stops: int = Field(
        default=6, ge=3, le=10, description="Stops on the line; a route calls at three in a row."
    )
    vehicles: list[str] = Field(
        default_factory=lambda: ["ferry", "coach", "barge", "tram", "sled"],
        min_length=1,
        description="What departs (a lowercase word; the title adds 's' or 'es').",
    )
    first_hour: int = Field(default=5, ge=0, le=22, description="Earliest departure hour.")
    last_hour: int = Field(default=17, ge=0, le=22, description="Latest departure hour.")
    longest_journey: int = Field(
        default=300, ge=10, le=360, description="Minutes of a route (two legs), at most."
    )
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
    stops = lex.names(p.stops)
    slots = range(p.first_hour * 12, p.last_hour * 12 + 12)  # 5-minute slots
    starts = [5 * s for s in rng.sample(slots, p.departures)]
    # The stops lie on one line; a leg joins two neighbours and is run both ways. A route is
    # three neighbours in a row, either way: so there are never more legs than stops.
    half = p.longest_journey // 2
    legs = {(a, b): rng.randint(min(7, half), half) for a, b in itertools.pairwise(stops)}
    routes = []
    for _ in names:
        k = rng.randrange(len(stops) - 2)
        route = stops[k : k + 3]
        routes.append(tuple(reversed(route)) if rng.random() < 0.5 else tuple(route))
    vehicle = rng.choice(p.vehicles)
    say = p.phrases
    doc = Document()
    doc.say(say.title.format(place=lex.name(), vehicles=_plural(vehicle)) + "\n")
    for (a, b), minutes in rng.sample(sorted(legs.items()), len(legs)):
        doc.say(say.leg.format(start=a, end=b, minutes=minutes) + "\n")
    for n, t, (origin, via, stop) in zip(names, starts, routes, strict=True):
        doc.say(say.line.format(name=n, origin=origin, time=_clock(t), stop=stop, via=via) + "\n")
    both_ways = {**legs, **{(b, a): m for (a, b), m in legs.items()}}
    arrivals = {
        n: t + both_ways[origin, via] + both_ways[via, stop]
        for n, t, (origin, via, stop) in zip(names, starts, routes, strict=True)
    }
    for n in rng.sample(names, min(p.questions, len(names))):
        doc.say(say.arrives.format(name=n))
        doc.ask(_clock(arrivals[n]))
        doc.say(".\n")
    return doc


_SLOTS = {
    "name": r"[A-Z][a-z]+",
    "origin": r"[A-Z][a-z]+",
    "stop": r"[A-Z][a-z]+",
    "via": r"[A-Z][a-z]+",
    "start": r"[A-Z][a-z]+",
    "end": r"[A-Z][a-z]+",
    "time": r"\d\d:\d\d",
    "minutes": r"\d+",
}


def solve(prompt: str, p: SchedulesParams) -> str:
    say = p.phrases
    legs: dict[tuple[str, str], int] = {}  # a leg is run both ways
    for leg in re.finditer(f"^{template_regex(say.leg, **_SLOTS)}$", prompt, re.M):
        legs[leg["start"], leg["end"]] = legs[leg["end"], leg["start"]] = int(leg["minutes"])
    routes = {
        m["name"]: (_minutes(m["time"]), m["origin"], m["via"], m["stop"])
        for m in re.finditer(f"^{template_regex(say.line, **_SLOTS)}$", prompt, re.M)
    }
    question = last_line(prompt)
    asked = re.fullmatch(template_regex(say.arrives, **_SLOTS), question)
    if not asked or asked["name"] not in routes:
        raise SolveError(f"not a timetable question: {question!r}")
    start, origin, via, stop = routes[asked["name"]]
    if (origin, via) not in legs or (via, stop) not in legs:
        raise SolveError(f"a leg of the {asked['name']} is not in the timetable")
    return _clock(start + legs[origin, via] + legs[via, stop])


_generate, _solve = with_register(generate, solve)

FAMILY = Family(
    name="schedules",
    params=SchedulesParams,
    generate=_generate,
    solve=_solve,
    tiers=(3, 1),
    description="timetables and journey times, arrivals computed",
)
