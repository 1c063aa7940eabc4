"""Phrases as bank parameters: the wording of headings and questions, with named slots.

Every family writes its headings and questions from templates such as
`"Item {n} of the {list}: "`, with defaults in code and overrides in the bank. A hidden bank
rewords them all, so that even the surface of its questions has never been seen outside.

The same template drives both sides: the generator fills it (`str.format`), and the reference
solver turns it into a regex whose slots are named groups (`template_regex`), so a reworded
question is still parsed exactly.
"""

from __future__ import annotations

import re
import string
from contextvars import ContextVar
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, model_validator

_FORMATTER = string.Formatter()


def slots_of(template: str) -> list[str]:
    """The `{slot}` names of a template, in order (`{{` and `}}` are literal braces)."""
    try:
        parsed = list(_FORMATTER.parse(template))
    except ValueError as exc:
        raise ValueError(f"unbalanced braces in {template!r}: {exc}") from exc
    names = []
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        if spec or conversion or not name.isidentifier():
            raise ValueError(f"slots are plain {{names}}, not {{{name}!{conversion}:{spec}}}")
        names.append(name)
    return names


def check_template(template: str, *slots: str) -> str:
    """A one-line template that uses each of `slots` exactly once and nothing else."""
    found = slots_of(template)
    if sorted(found) != sorted(slots):
        want = ", ".join("{" + s + "}" for s in slots) or "no slots"
        raise ValueError(f"{template!r} must use {want}, each once (found {found})")
    if "\n" in template or "\r" in template:
        raise ValueError(f"{template!r} must be one line")
    return template


ANY_WORDING: ContextVar[bool] = ContextVar("any_wording", default=False)
"""Set, `template_regex` matches any wording in place of a template's text: a family's own
solver then reads its layout with the wording left free, as an attacker who knows the family
but not the bank would (`exam_builder.solvers.wording`)."""


def template_regex(template: str, **slots: str) -> str:
    """A regex matching the filled template: text literal, each slot a named group (with
    `ANY_WORDING` set, each piece of text is any run of characters on one line, as short as
    matches; spaces at its ends kept)."""
    out = []
    for literal, name, _, _ in _FORMATTER.parse(template):
        if ANY_WORDING.get() and literal.strip():
            lead = " " if literal[:1] == " " else ""
            tail = " " if literal[-1:] == " " else ""
            out.append(f"{lead}[^\n]*?{tail}")
        else:
            out.append(re.escape(literal))
        if name is not None:
            out.append(f"(?P<{name}>{slots[name]})")
    return "".join(out)


class Phrases(BaseModel):
    """Base of a family's phrase set: subclasses declare `SLOTS` (field -> required slots)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    SLOTS: ClassVar[dict[str, tuple[str, ...]]] = {}

    @model_validator(mode="after")
    def _templates(self) -> Phrases:
        seen: dict[str, str] = {}
        for field, slots in self.SLOTS.items():
            text = getattr(self, field)
            try:
                check_template(text, *slots)
            except ValueError as exc:
                raise ValueError(f"{field}: {exc}") from exc
            if text in seen:
                raise ValueError(f"{field} and {seen[text]} must differ")
            seen[text] = field
        return self
