"""Invented words, made from the bank's syllables.

Every name, place, item and foreign word in an exam is a pseudo-word built here, so that the
statistics of ordinary English text say nothing about it: the only way to an answer is the
definition given in the prompt. A hidden bank uses its own syllables, so its surface is unseen.
"""

from __future__ import annotations

import random


class Lexicon:
    """Draws pseudo-words for one document; never the same word twice in that document."""

    def __init__(self, rng: random.Random, syllables: list[str]) -> None:
        self._rng = rng
        self._syllables = syllables
        self._used: set[str] = set()  # membership only: never iterated (determinism)

    def word(self, min_syllables: int = 2, max_syllables: int = 3, min_len: int = 3) -> str:
        """A fresh lowercase pseudo-word (unique within this document)."""
        for _ in range(1000):
            n = self._rng.randint(min_syllables, max_syllables)
            w = "".join(self._rng.choice(self._syllables) for _ in range(n))
            if len(w) >= min_len and w not in self._used:
                self._used.add(w)
                return w
        raise ValueError("the bank's syllables are too few to make enough distinct words")

    def name(self, min_syllables: int = 2, max_syllables: int = 3) -> str:
        """A fresh capitalised pseudo-word, for people, places and things."""
        return self.word(min_syllables, max_syllables).capitalize()

    def words(self, n: int, min_syllables: int = 2, max_syllables: int = 3) -> list[str]:
        return [self.word(min_syllables, max_syllables) for _ in range(n)]

    def names(self, n: int, min_syllables: int = 2, max_syllables: int = 3) -> list[str]:
        return [self.name(min_syllables, max_syllables) for _ in range(n)]
