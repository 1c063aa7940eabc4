"""A failure category holds harness words and numbers only, so it cannot carry a bundle's text.

`WorkerFailure` is what every grading failure is raised as; its `str()` (what a traceback shows
and what a hidden report publishes) is its category. These tests pin the rules that make a
category safe by construction: text is refused where a number is expected (even a str or an int
subclass that formats itself), a failure needs a `Category`, and the detail stays out of
`str()` and of `text(public=False)`.
"""

from __future__ import annotations

import traceback

import pytest

from toolkit.grading.session import Category, Kind, Where, WorkerFailure, exit_category


class Sneaky(int):
    """An int that formats as text of its choosing."""

    def __format__(self, spec: str) -> str:
        return "the exam's first prompt"


@pytest.mark.parametrize("number", ["3", Sneaky(3), True, None, b"3"])
def test_a_category_refuses_anything_but_plain_numbers(number: object) -> None:
    with pytest.raises(TypeError):
        Category(Kind.EXITED, (number,))  # type: ignore[arg-type]
    with pytest.raises((TypeError, ValueError)):  # None: a batch missing
        Category(Kind.RAISED, (), Where.GENERATE, number)  # type: ignore[arg-type]


def test_a_failure_needs_a_category_and_keeps_its_detail_out_of_str() -> None:
    with pytest.raises(TypeError):
        WorkerFailure("the bundle failed: <prompt text>")  # type: ignore[arg-type]
    failure = WorkerFailure(Category(Kind.RAISED, (), Where.GENERATE, 3), "secret words")
    assert str(failure) == "generate() on batch 3: the bundle raised an error"
    assert failure.text(public=False) == str(failure)
    assert failure.text(public=True).endswith(": secret words")
    try:
        raise failure.at(Where.LOGPROBS, 2) from None
    except WorkerFailure as placed:
        shown = "".join(traceback.format_exception(placed))
    assert "secret words" not in shown and "next_byte_logprobs() on batch 2" in shown


def test_every_kind_renders_with_its_numbers() -> None:
    for kind in Kind:
        numbers = tuple(range(1, kind.value.count("{") + 1))
        text = str(Category(kind, numbers))
        assert "{" not in text and text
    with pytest.raises(ValueError):
        Category(Kind.EXITED, ())  # a number missing
    with pytest.raises(ValueError):
        Category(Kind.RAISED, (), Where.GENERATE)  # a batch missing


@pytest.mark.parametrize(
    ("code", "said"),
    [
        (3, "crashed: the worker exited with status 3"),
        (-11, "crashed: the worker was killed by signal 11"),
        (-9, "crashed: the worker was killed (signal 9: a memory or process limit)"),
        (137, "crashed: the worker was killed (signal 9: a memory or process limit)"),
        (None, "crashed: the worker was killed"),
        (10**12, "crashed: the worker was killed"),  # not a status: no room for a message
    ],
)
def test_an_exit_is_a_status_or_a_signal(code: int | None, said: str) -> None:
    assert str(exit_category(code)) == said
