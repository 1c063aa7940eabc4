"""Each built-in family, on many documents and parameter settings: the reference solver reads
every answer from the visible prompt, prompts stay short, and bad parameters are refused."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from exam_builder.document import visible_tail
from exam_builder.families import BUILTIN
from exam_builder.generate import document_rng
from exam_builder.lexicon import Lexicon

SYLLABLES = "ka vo rel tam zu ish orn bex qua lim dro fen sha tor vek ul".split()  # noqa: SIM905

SETTINGS: dict[str, list[dict[str, Any]]] = {
    "passages": [{}, {"people": 1, "facts_per_person": 2, "questions": 1}, {"people": 5}],
    "records": [
        {},
        {"rows": 3, "questions": 5},
        {"rows": 10, "columns": [{"name": "age", "kind": "number", "low": 100, "high": 110}]},
    ],
    "vocabulary": [{}, {"plurals": False, "phrase_words": 4}, {"entries": 2, "questions": 4}],
    "schedules": [{}, {"departures": 2}, {"departures": 8, "first_hour": 0, "last_hour": 0}],
    "lists": [{}, {"min_length": 3, "max_length": 3}, {"kinds": ["backwards"], "questions": 1}],
    "symbolic": [{}, {"examples": 2}, {"rules": ["suffix", "prefix"], "examples": 2}],
    "numeric": [{}, {"operations": 0.0, "shown": 4}, {"operations": 1.0, "questions": 5}],
    "extraction": [{}, {"messages": 3}, {"messages": 5, "questions": 5}],
}

INVALID: dict[str, dict[str, Any]] = {
    "passages": {"relations": [{"fact": "{a} likes it.", "question": "What does {a} like?"}]},
    "records": {"columns": [{"name": "name", "kind": "word"}]},
    "vocabulary": {"meanings": ["glass", "stone"]},
    "schedules": {"last_hour": 22, "longest_journey": 200},
    "lists": {"min_length": 9, "max_length": 4},
    "symbolic": {"rules": ["transpose"]},
    "numeric": {"shown": 8, "furthest_term": 6},
    "extraction": {"domains": ["Vesk.com"]},
}


def test_every_builtin_family_has_settings() -> None:
    assert set(SETTINGS) == set(BUILTIN) == set(INVALID)


@pytest.mark.parametrize(
    ("family", "params"),
    [(f, p) for f, settings in SETTINGS.items() for p in settings],
    ids=lambda v: str(v)[:40],
)
def test_reference_solver_reads_every_answer(family: str, params: dict[str, Any]) -> None:
    fam = BUILTIN[family]
    p = fam.params.model_validate(params)
    for number in range(150):
        rng = document_rng("test seed", family, number)
        doc = fam.generate(rng, p, Lexicon(rng, SYLLABLES))
        pairs = doc.prompts()
        assert pairs, "a document without questions"
        assert len({prompt.rsplit(chr(10), 1)[-1] for prompt, _ in pairs}) == len(pairs)
        assert doc.text().isascii()
        for prompt, answer in pairs:
            assert answer
            if not params:  # default sizes keep every prompt inside the grader's window
                assert len(prompt.encode()) < 1024
            assert fam.solve(visible_tail(prompt), p) == answer, (number, prompt, answer)


@pytest.mark.parametrize("family", sorted(BUILTIN))
def test_same_rng_same_document(family: str) -> None:
    fam = BUILTIN[family]
    p = fam.params()
    texts = []
    for _ in range(2):
        rng = document_rng("s", family, 7)
        texts.append(fam.generate(rng, p, Lexicon(rng, SYLLABLES)).text())
    assert texts[0] == texts[1]


@pytest.mark.parametrize("family", sorted(BUILTIN))
def test_invalid_params_are_refused(family: str) -> None:
    with pytest.raises(ValidationError):
        BUILTIN[family].params.model_validate(INVALID[family])
    with pytest.raises(ValidationError):
        BUILTIN[family].params.model_validate({"questions": 0})
