"""Every `toolkit ...` command the documentation shows exists, with the options it shows.

Read from the README, the documentation pages (site/docs/*/) and every command's own `-h` text
(its examples): a renamed command or option, or an example written against a command that was
never built, fails here instead of failing a reader.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from toolkit.cli import CONTEXT, cli

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "site" / "docs").glob("*/*.md"))]
FENCE = re.compile(r"^ *```[^\n]*\n(.*?)^ *```", re.S | re.M)
SPAN = re.compile(r"`([^`\n]+)`")


def _code(markdown: str) -> Iterator[str]:
    """The text of every fenced block, then of every inline code span outside them."""
    yield from FENCE.findall(markdown)
    yield from SPAN.findall(FENCE.sub("", markdown))


def _help_examples() -> Iterator[tuple[str, str]]:
    def walk(group: click.Group, path: list[str]) -> Iterator[tuple[str, str]]:
        for name, command in sorted(group.commands.items()):
            yield " ".join(["toolkit", *path, name, "-h"]), command.help or ""
            if isinstance(command, click.Group):
                yield from walk(command, [*path, name])

    yield "toolkit -h", cli.help or ""
    yield from walk(cli, [])


def invocations(text: str) -> Iterator[list[str]]:
    """The words after each `toolkit` (or `.../bin/toolkit`) that starts a shell command."""
    for line in text.replace("\\\n", " ").splitlines():
        try:
            words = shlex.split(line, comments=True)
        except ValueError:  # prose in a code span (an apostrophe): words as they are
            words = line.split()
        for i, word in enumerate(words):
            if word == "toolkit" or word.endswith("/bin/toolkit"):
                yield words[i + 1 :]


def problems(words: list[str]) -> list[str]:
    """What of `toolkit WORDS` does not exist ([] if it all does)."""
    command: click.Command = cli
    shown = ["toolkit"]
    rest = list(words)
    while isinstance(command, click.Group) and rest and not rest[0].startswith("-"):
        name = rest.pop(0)
        if name in ("/", "|") or not re.fullmatch(r"[a-z][a-z-]*", name):
            return []  # `runs recover / validate`, a placeholder: nothing more to check
        sub = command.commands.get(name)
        if sub is None:
            return [f"`{' '.join(shown)}` has no command {name!r}"]
        command, shown = sub, [*shown, name]
    known = set(CONTEXT["help_option_names"])
    for param in command.params:
        known |= {*param.opts, *param.secondary_opts}
    return [
        f"`{' '.join(shown)}` has no option {word.split('=', 1)[0]}"
        for word in rest
        if word.startswith("-") and len(word) > 1 and not word[1:2].isdigit()
        if word.split("=", 1)[0] not in known
    ]


def _cases() -> Iterator[tuple[str, str]]:
    for path in DOCS:
        for code in _code(path.read_text(encoding="utf-8")):
            yield str(path.relative_to(REPO)), code
    yield from _help_examples()


@pytest.mark.parametrize(("where", "text"), list(_cases()), ids=lambda v: str(v)[:40])
def test_documented_commands_exist(where: str, text: str) -> None:
    found = [p for words in invocations(text) for p in problems(words)]
    assert found == [], f"{where}: {found}"


def test_the_checker_catches_what_it_should() -> None:
    assert problems(["run", "--agent", "scripted", "--seed", "0"]) == []
    assert problems(["runs", "recover", "/", "validate"]) == []
    assert problems(["run", "--no-such-option", "1"]) == [
        "`toolkit run` has no option --no-such-option"
    ]
    assert problems(["runz"]) == ["`toolkit` has no command 'runz'"]
    assert problems(["campaign", "plan", "f.toml", "--format=json"]) == []
    assert list(invocations("x=1 .venv/bin/toolkit images list \\\n  --images f  # note")) == [
        ["images", "list", "--images", "f"]
    ]
