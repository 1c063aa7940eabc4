"""Reading a prompt without knowing its wording: the question line, tokens, keys, sentences.

Every generic solver starts from the same few structural facts of a prompt: the answer follows
its unfinished last line (the *question*); everything before is the *context*; a *token* is a
run of letters and digits, possibly joined by `-`, `:`, `@` or `.` (so codes like
`KV-4821`, times like `08:15` and addresses stay whole); a *key* is a token of the question
that also occurs in the context, preferably rarely there (the name or value being asked about,
not a word of the wording, which repeats). Masked earlier answers (`MASK`) are never tokens,
and lines holding one (earlier questions) do not count as context for rarity.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from functools import cached_property

from exam_builder.document import MASK

TOKEN = re.compile(r"[A-Za-z0-9]+(?:[-:@.][A-Za-z0-9]+)*")
"""A word, number, code, clock time or address."""
KEY_MAX_COUNT = 3
"""A question token seen more often than this in the context is more likely wording than a key
(it is still tried, after the rare ones)."""
ORDINALS: tuple[str, ...] = ("first", "second", "third", "fourth", "fifth", "sixth")
ORDINALS += ("seventh", "eighth", "ninth", "tenth", "eleventh", "twelfth")
"""Ordinal words a question may name a position with."""
SHORT_LINE = 3
"""Tokens a last line may have at most to be read with the line above it (see `question`)."""
MAX_KEYS = 8
"""Keys a solver tries at most: this bounds its work by the length of the context."""
SEPARATOR = (
    r"(?:[^\S\n]*(?::=|[:=|\t]|->|=>|\u2192|\u2014|\u2013)[^\S\n]*|[^\S\n]+-[^\S\n]+"
    r"|[^\S\n]+(?:is|are|was|were|means|equals|stands for)[^\S\n]+)"
    r"(?:(?:a|an|the|called|named)[^\S\n]+)?"
)
"""What joins a key to its value in a definition on one line: `X: Y`, `X = Y`, `X := Y`,
`X -> Y`, `X => Y`, `X - Y` (or an en or em dash, or an arrow), `X<tab>Y`, `X is Y`,
`X means Y`, `X is called Y`..."""
_DEFINITION = re.compile(
    rf"(?<![A-Za-z0-9])(?=(?P<a>{TOKEN.pattern}){SEPARATOR}(?P<b>{TOKEN.pattern}))"
)
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n")


def tokens(text: str) -> list[str]:
    """The tokens of `text`, in order."""
    return TOKEN.findall(text)


def sentences(text: str) -> list[str]:
    """`text` cut at line ends and at sentence ends (`.`, `!`, `?`, `;` before a space)."""
    return [s for s in _SENTENCE_END.split(text) if s.strip()]


@dataclass(frozen=True)
class Prompt:
    """A prompt as a solver sees it: the question line and the context before it."""

    text: str

    @cached_property
    def question(self) -> str:
        """The unfinished last line: the answer continues it. When that line is short and
        names nothing of the text before it (earlier questions aside), while the line above
        names something earlier (`A: ` under `Q: Where does Talmi live?`), that line too."""
        lines = self.text.split("\n")
        last = tokens(lines[-1])
        if len(lines) >= 3 and MASK not in lines[-2] and len(last) <= SHORT_LINE:
            earlier = set(tokens("\n".join(x for x in lines[:-2] if MASK not in x)))
            if not earlier.union(tokens(lines[-2])).intersection(last) and earlier.intersection(
                tokens(lines[-2])
            ):
                return lines[-2] + "\n" + lines[-1]
        return lines[-1]

    @cached_property
    def context(self) -> str:
        """Everything before the question line."""
        return self.text[: len(self.text) - len(self.question)]

    @cached_property
    def counts(self) -> Counter[str]:
        """How often each token occurs in the context, lines holding a mask (earlier
        questions: wording) left out."""
        masked = set(self._masked_lines)
        return Counter(tokens("\n".join(x for x in self.context.split("\n") if x not in masked)))

    @cached_property
    def question_tokens(self) -> list[str]:
        return tokens(self.question)

    @cached_property
    def indices(self) -> list[int]:
        """The positions the question may ask for: its whole numbers and ordinals (`8`,
        `8th`, `eighth`), in order."""
        out = []
        for token in self.question_tokens:
            word = token.lower()
            if word.isdigit():
                out.append(int(word))
            elif word[:-2].isdigit() and word[-2:] in ("st", "nd", "rd", "th"):
                out.append(int(word[:-2]))
            elif word in ORDINALS:
                out.append(ORDINALS.index(word) + 1)
        return out

    @cached_property
    def sentences(self) -> list[tuple[str, list[str]]]:
        """The context's sentences (see `sentences`), each with its tokens."""
        return [(s, tokens(s)) for s in sentences(self.context)]

    @cached_property
    def _masked_lines(self) -> list[str]:
        lines = self.context.split("\n")
        span = self.question.count("\n")  # a question of two lines: so were earlier ones
        return [
            line
            for i, line in enumerate(lines)
            if any(MASK in lines[j] for j in range(i, min(i + span + 1, len(lines))))
        ]

    def masked(self, sentence: str) -> bool:
        """Whether `sentence` is on a context line of an earlier question: a line holding a
        mask (or, when the question takes two lines, the line above one)."""
        return any(sentence in line for line in self._masked_lines)

    @cached_property
    def definitions(self) -> list[tuple[int, str, str]]:
        """Every (offset, left, right) token pair of the context joined by a `SEPARATOR`."""
        return [(m.start(), m["a"], m["b"]) for m in _DEFINITION.finditer(self.context)]

    def occurrences(self, token: str) -> list[int]:
        """Offsets of `token` as a whole token in the context, in order."""
        if not token:
            return []
        out = []
        text = self.context
        at = text.find(token)
        while at >= 0:
            end = at + len(token)
            if (at == 0 or not text[at - 1].isalnum()) and (
                end == len(text) or not text[end].isalnum()
            ):
                out.append(at)
            at = text.find(token, at + 1)
        return out

    @cached_property
    def spoken(self) -> str:
        """The question's tokens, lowercased, space-separated and space-framed."""
        return " " + " ".join(self.question_tokens).lower() + " "

    def mentions(self, text: str) -> bool:
        """Whether the question holds `text` as whole tokens (case-insensitive)."""
        words = tokens(text)
        return bool(words) and " " + " ".join(words).lower() + " " in self.spoken

    @cached_property
    def keys(self) -> list[str]:
        """The question's keys, at most `MAX_KEYS`: its rare tokens (see the module docstring),
        the last-mentioned first, then its other tokens of the context, the rarest first."""
        seen = [t for t in dict.fromkeys(reversed(self.question_tokens)) if self.counts[t]]
        rare = [t for t in seen if self.counts[t] <= KEY_MAX_COUNT]
        common = sorted((t for t in seen if t not in rare), key=lambda t: self.counts[t])
        return (rare + common)[:MAX_KEYS]


def stem(token: str) -> str:
    """A crude stem for matching words of a question to words of the context: lowercase, at
    most four characters (`make` matches `maker`, `live` matches `lives`)."""
    return token.lower()[:4]


def clean(value: str) -> str | None:
    """A guess cut before any masked span; None when nothing is left."""
    value = value.split(MASK, 1)[0]
    return value or None
