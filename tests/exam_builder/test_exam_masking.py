"""The demo exam's shape: all families, non-empty answers, prompts cut at their spans, masks."""

from __future__ import annotations

from collections import defaultdict

import pytest

from exam_builder.bank import Bank
from exam_builder.document import MASK, Answer, Document
from exam_builder.exam_file import Question
from exam_builder.families import BUILTIN
from exam_builder.generate import GeneratedDocument, generate_questions


def _by_document(questions: list[Question]) -> dict[str, list[Question]]:
    docs: dict[str, list[Question]] = defaultdict(list)
    for q in questions:
        family, number, span = q.id.rsplit("-", 2)
        assert family == q.family
        docs[f"{family}-{number}"].append(q)
        assert int(span) == len(docs[f"{family}-{number}"]) - 1, "spans out of order"
    return docs


def test_all_eight_families_in_the_demo_exam(demo_bank: Bank) -> None:
    questions = generate_questions(demo_bank)
    assert len(questions) == 100
    assert {q.family for q in questions} == set(BUILTIN) and len(BUILTIN) == 8
    assert len({q.id for q in questions}) == len(questions)


def test_every_answer_non_empty_and_prompt_short(demo_bank: Bank) -> None:
    for q in generate_questions(demo_bank):
        assert q.answer.strip(), q.id
        assert len(q.prompt.encode("utf-8")) < 1000, q.id


def test_prompts_end_where_answers_begin_and_earlier_answers_are_masked(
    demo_documents: list[GeneratedDocument],
) -> None:
    """Rebuild each document from the exam's questions alone and check it against the source."""
    questions = [q for d in demo_documents for q in d.questions]
    for key, qs in _by_document(questions).items():
        # The last prompt holds every earlier span as a mask: fill them in, add its answer.
        last = qs[-1]
        pieces = last.prompt.split(MASK)
        assert len(pieces) == len(qs), f"{key}: expected {len(qs) - 1} masks"
        rebuilt = "".join(p + q.answer for p, q in zip(pieces, qs, strict=True))
        for j, q in enumerate(qs):
            # Prompt j is the document up to span j, with exactly the j earlier spans masked.
            assert q.prompt.count(MASK) == j, q.id
            shown = q.prompt
            for earlier in qs[:j]:
                shown = shown.replace(MASK, earlier.answer, 1)
            assert rebuilt.startswith(shown + q.answer), f"{q.id}: prompt does not end at its span"
            if j:  # the previous span sits, masked, right after the previous prompt
                assert q.prompt.startswith(qs[j - 1].prompt + MASK), q.id
        source = next(d for d in demo_documents if d.questions[0].id == qs[0].id).document
        assert source.text().startswith(rebuilt), f"{key}: not the generated document"


def test_no_earlier_answer_appears_at_its_span(demo_documents: list[GeneratedDocument]) -> None:
    """Stronger than string search: walk the document's parts and compare offsets."""
    for gd in demo_documents:
        offset, spans = 0, []
        for part in gd.document.parts:
            if isinstance(part, Answer):
                spans.append(offset)
                offset += len(part.text)
            else:
                offset += len(part)
        text = gd.document.text()
        for j, q in enumerate(gd.questions):
            assert text[spans[j] :].startswith(q.answer)
            masked_at = [i for i in range(len(q.prompt)) if q.prompt.startswith(MASK, i)]
            assert len(masked_at) == j, q.id


def test_document_prompts_mask_only_earlier_spans() -> None:
    doc = Document()
    doc.say("a=")
    doc.ask("xy")
    doc.say("; b=")
    doc.ask("zw")
    doc.say("; c=")
    doc.ask("q")
    assert doc.prompts() == [
        ("a=", "xy"),
        (f"a={MASK}; b=", "zw"),
        (f"a={MASK}; b={MASK}; c=", "q"),
    ]
    with pytest.raises(ValueError):
        doc.ask("")
