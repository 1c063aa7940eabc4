"""Readers of key/value entries: what an attacker holding the public side writes first.

The public banks show a look-up layout (the tier-1 register, exam_builder/families/register.py):
a key glued to a value whose letters a punctuation byte splits, `Kq.z.w`, asked as `locker K`.
A hidden bank may change every parameter of it (the heading, the question, the separator, the
alphabets, the sizes, the key's width), so these readers leave every one of them free and infer
the layout from the prompt alone:

- the *key* is the question's last whitespace-separated word (`K`, `K7`, `vost`), or the last
  letters or digits of it;
- an *entry* is a whitespace-separated chunk of a context line (lines of earlier questions
  left out) that holds the key at one end; its *value* is the rest of the chunk, or the next
  chunk when the key stands alone, with every byte that is not a letter or a digit dropped
  (`q.z.w` -> `qzw`): what the register writes between a value's letters is no secret.

Each reader is one way of pairing a key with its value; the gate runs each on its own:
`key_glued` (the value follows the key in its chunk: the public layout), `key_trailing` (the
value comes first: `q.z.w=K`), `key_spaced` (the key is a chunk of its own and the value the
next chunk: `K: q.z.w`), and `register`, which first finds the register line (the context line
whose chunks most share one shape, key at one end, value at the other) and reads the key's
entry there, whichever end the key stands at. None of them knows a word of the bank.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from exam_builder.document import MASK
from exam_builder.solvers.base import Solver
from exam_builder.solvers.text import Prompt

_ALNUM = re.compile(r"[A-Za-z0-9]+")
_TAIL = re.compile(r"[A-Za-z0-9]+$")


def joined(text: str) -> str:
    """`text`'s letters and digits, in order, everything else dropped (`q.z.w` -> `qzw`)."""
    return "".join(_ALNUM.findall(text))


def asked_keys(p: Prompt) -> list[str]:
    """The question's key, as a reader that knows no wording finds it: its last word, then
    that word's last run of letters or digits, then its last byte (most specific first)."""
    words = p.question.split()
    if not words:
        return []
    last = words[-1]
    out = [last]
    tail = _TAIL.search(last)
    if tail:
        out.append(tail[0])
        out.append(tail[0][-1])
    return list(dict.fromkeys(k for k in out if k))


def context_lines(p: Prompt) -> list[list[str]]:
    """The context's lines as whitespace-separated chunks, earlier questions (lines holding a
    mask) left out, latest line first."""
    lines = [line for line in p.context.split("\n") if MASK not in line and line.strip()]
    return [line.split() for line in reversed(lines)]


Pair = Callable[[list[str], int, str], str | None]
"""Given a line's chunks, an index and the key: the value paired with the key there, or None."""


def _glued(chunks: list[str], i: int, key: str) -> str | None:
    chunk = chunks[i]
    if chunk.startswith(key) and len(chunk) > len(key):
        return joined(chunk[len(key) :]) or None
    return None


def _trailing(chunks: list[str], i: int, key: str) -> str | None:
    chunk = chunks[i]
    if chunk.endswith(key) and len(chunk) > len(key):
        return joined(chunk[: -len(key)]) or None
    return None


def _spaced(chunks: list[str], i: int, key: str) -> str | None:
    if joined(chunks[i]) == joined(key) and i + 1 < len(chunks):
        return joined(chunks[i + 1]) or None
    return None


def _entries(p: Prompt, pair: Pair) -> Iterator[str]:
    """Every value `pair` finds for one of the question's keys, latest line first."""
    for key in asked_keys(p):
        for chunks in context_lines(p):
            for i in range(len(chunks)):
                value = pair(chunks, i, key)
                if value is not None:
                    yield value


def _first(pair: Pair) -> Callable[[Prompt], str | None]:
    def guess(p: Prompt) -> str | None:
        return next(_entries(p, pair), None)

    return guess


def shape(chunk: str) -> str:
    """A chunk's shape: each run of letters and digits a `w`, each other byte itself
    (`Kq.z.w` -> `w.w.w`, `K7q.z.w` too: a key's width and alphabet are free)."""
    return _ALNUM.sub("w", chunk)


def _register(p: Prompt) -> str | None:
    """The key's entry on the register line: the context line with the most chunks of one
    shape (at least three), read with the key at whichever end of its chunk it stands."""
    best: tuple[int, list[str]] | None = None
    for chunks in context_lines(p):
        counts: dict[str, int] = {}
        for chunk in chunks:
            counts[shape(chunk)] = counts.get(shape(chunk), 0) + 1
        top = max(counts.values(), default=0)
        if top >= 3 and (best is None or top > best[0]):
            best = (top, chunks)
    if best is None:
        return None
    chunks = best[1]
    for key in asked_keys(p):
        for pair in (_glued, _trailing, _spaced):
            for i in range(len(chunks)):
                value = pair(chunks, i, key)
                if value is not None:
                    return value
    return None


KEY_GLUED = Solver(
    "key_glued",
    "entry: the letters after the key in its chunk, punctuation dropped",
    _first(_glued),
)
KEY_TRAILING = Solver(
    "key_trailing",
    "entry: the letters before the key in its chunk, punctuation dropped",
    _first(_trailing),
)
KEY_SPACED = Solver(
    "key_spaced", "entry: the chunk after the key's own chunk, punctuation dropped", _first(_spaced)
)
REGISTER = Solver(
    "register", "entry on the line of most same-shape chunks, key at either end", _register
)
