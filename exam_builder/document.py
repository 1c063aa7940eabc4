"""Documents, answer spans and masking: how one generated text becomes several questions.

A family generates a `Document`: a sequence of plain text and answer spans. Each span becomes one
question whose prompt is the document up to the span's start, with every *earlier* span of the
same document replaced by `MASK`. So a later question never shows an earlier question's answer,
and the exam is a set of independent questions rather than a transcript that could be replayed.

`MASK` is three U+2592 MEDIUM SHADE characters. Generated documents are ASCII only (the bank's
syllables and vocabularies are checked to be ASCII), so the mask can never occur naturally in a
document, and it has the same length whatever the hidden answer, so it leaks nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MASK = "\u2592\u2592\u2592"
"""Stands in the prompt for every earlier answer span of the same document."""


@dataclass(frozen=True)
class Answer:
    """An answer span: the exact text a model must produce, and its difficulty tier (None: the
    generator did not say; `exam_builder.families.base.TIERS` says what each tier is)."""

    text: str
    tier: int | None = None


@dataclass
class Document:
    """Text with answer spans, built in reading order by a family's generator."""

    parts: list[str | Answer] = field(default_factory=list)

    def say(self, text: str) -> None:
        """Append plain text (visible to every later question)."""
        self.parts.append(text)

    def ask(self, answer: str, tier: int | None = None) -> None:
        """Append an answer span (one question; masked in later questions' prompts) of `tier`
        (1, 2 or 3; None: the family's only tier)."""
        if not answer:
            raise ValueError("an answer span must not be empty")
        if tier is not None and tier not in (1, 2, 3):
            raise ValueError(f"tier {tier!r}: a question's tier is 1, 2 or 3")
        self.parts.append(Answer(answer, tier))

    @property
    def tiers(self) -> list[int | None]:
        """The tier of every answer span, in order."""
        return [p.tier for p in self.parts if isinstance(p, Answer)]

    @property
    def answers(self) -> list[str]:
        return [p.text for p in self.parts if isinstance(p, Answer)]

    def text(self) -> str:
        """The full document, answers shown (for checks and debugging, never in an exam)."""
        return "".join(p.text if isinstance(p, Answer) else p for p in self.parts)

    def prompts(self) -> list[tuple[str, str]]:
        """(prompt, answer) for every span: the text before it, earlier spans masked."""
        out: list[tuple[str, str]] = []
        seen: list[str] = []
        for part in self.parts:
            if isinstance(part, Answer):
                out.append(("".join(seen), part.text))
                seen.append(MASK)
            else:
                seen.append(part)
        return out


def visible_tail(prompt: str, max_bytes: int = 1024) -> str:
    """The prompt as the grader sends it: its last `max_bytes` bytes (UTF-8), decoded."""
    data = prompt.encode("utf-8")[-max_bytes:]
    return data.decode("utf-8", errors="ignore")
