"""Re-asks in the reference learner's training text (`toolkit.learn.corpus.render`): a question
asked again is a copy of its own line, placed after it, with its answer a target; a question
with nothing before it on its line is never re-asked; without re-asks the text is unchanged."""

from __future__ import annotations

import random

from exam_builder.document import Document
from toolkit.learn.corpus import MASK_BYTES, pieces_of, questions_of, render


def register(pairs: int = 4) -> Document:
    doc = Document()
    doc.say("Stock: " + ", ".join(f"k{i} {100 + i}" for i in range(pairs)) + "\nFirst line\n")
    for i in reversed(range(pairs)):
        doc.say(f"How many k{i}? ")
        doc.ask(str(100 + i))
        doc.say(" units.\n")
    return doc


def test_each_question_line_is_found_with_the_rest_of_its_line() -> None:
    found = [q for _, q in questions_of(pieces_of(register()))]
    assert [(q.before, q.answer, q.after) for q in found] == [
        (f"How many k{i}? ", str(100 + i), " units.\n") for i in reversed(range(4))
    ]


def test_a_reask_comes_after_its_own_question_and_its_answer_is_a_target() -> None:
    for seed in range(30):
        ex = render(register(), random.Random(seed), mask_share=0.5, text_weight=0.1, reask=1.5)
        lines = ex.data.split(b"\n")
        asks = [line for line in lines if line.startswith(b"How many")]
        assert len(asks) == 4 + 6
        first_seen: dict[bytes, int] = {}
        for n, line in enumerate(asks):
            key = line.split(b"?")[0]
            if key in first_seen:
                assert MASK_BYTES not in line  # a re-ask always shows its answer
            first_seen.setdefault(key, n)
        # Keys first appear in the document's own order: no copy comes before its original.
        assert list(first_seen) == [f"How many k{i}".encode() for i in reversed(range(4))]
        # Every answer shown carries the full weight, and only the answers do.
        for at in range(len(ex.data)):
            written = ex.data[at : at + 3]
            if written.isdigit() and ex.data[at - 2 : at] == b"? ":
                assert ex.weights[at : at + 3] == [1.0] * 3
        assert sum(w == 1.0 for w in ex.weights) >= 6 * 3


def test_a_question_with_nothing_before_it_on_its_line_is_never_reasked() -> None:
    doc = Document()
    doc.say("Ledger\nAnswer below:\n")
    doc.ask("417")
    doc.say("\n")
    assert questions_of(pieces_of(doc)) == []
    ex = render(doc, random.Random(0), mask_share=0.0, text_weight=0.1, reask=5.0)
    assert ex.data == b"Ledger\nAnswer below:\n417\n"


def test_without_reasks_the_text_is_what_it_was() -> None:
    doc = register()
    for seed in range(10):
        plain = render(doc, random.Random(seed), mask_share=0.5, text_weight=0.1)
        # The same masking draws, written out the old way: answer by answer.
        rng = random.Random(seed)
        data = bytearray()
        for part in doc.parts:
            if isinstance(part, str):
                data += part.encode()
            else:
                data += MASK_BYTES if rng.random() < 0.5 else part.text.encode()
        assert plain.data == bytes(data)
