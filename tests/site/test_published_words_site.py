"""The methodology page states the published bounds in the words of the code (issue #38)."""

from __future__ import annotations

from pathlib import Path

from toolkit.grading import publish


def test_the_methodology_page_states_the_bounds_the_code_enforces(built_site: Path) -> None:
    page = " ".join((built_site / "methodology.html").read_text(encoding="utf-8").split())
    for words in (publish.BPB_WORDS, publish.TIME_WORDS, publish.ABLATION_WORDS):
        assert words in page, words
    assert "decimals" not in page
