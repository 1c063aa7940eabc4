"""The default corpus: real English prose, extracted from wiki markup."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from toolkit.text.corpus import default_corpus, extract_articles, wiki_to_text


def test_wiki_markup_is_stripped() -> None:
    markup = (
        "{{Infobox|name=x|{{nested}}}}'''Albedo''' is the [[reflection|reflectivity]] of a "
        "surface.<ref>Some source</ref> It is measured on a [[scale]] from zero to one. "
        "[[File:Albedo.png|thumb|A [[picture]]]]\n== History ==\n* a list item\n"
        "[[Category:Physics]]"
    )
    text = wiki_to_text(markup)
    assert text == (
        "Albedo is the reflectivity of a surface. It is measured on a scale from zero to one."
    )


def test_redirects_are_skipped() -> None:
    prose = "Real prose about B and its history. " * 3
    xml = (
        "<page><title>A</title><text>#REDIRECT [[B]]</text></page>"
        f"<page><title>B</title><text>{prose}</text></page>"
    )
    assert [title for title, _ in extract_articles(xml)] == ["B"]


def test_default_corpus_is_english_prose() -> None:
    data = default_corpus()
    assert len(data) > 2_000_000
    text = data.decode("utf-8")
    assert "Anarchism is a political philosophy" in text
    assert "{{" not in text and "[[" not in text and "<ref" not in text
    # Ordinary English: the most common word is "the".
    words = text.lower().split()
    # (counted once: a count per distinct word took seconds of the suite)
    assert Counter(words[:50000]).most_common(1)[0][0] == "the"


def test_processes_extracting_into_one_state_dir_at_once_all_succeed(tmp_path: Path) -> None:
    """A campaign's runs on one box share the state dir: each extraction writes a temporary
    file of its own (a shared fixed name let one process move another's away)."""
    import os
    import subprocess
    import sys

    # Each also says whether it imported gensim: the dump is found without it (its import was
    # most of an extraction's CPU).
    code = (
        "import sys; from toolkit.text.corpus import default_corpus_path as d; "
        "print(d(), 'gensim' in sys.modules)"
    )
    for attempt in range(2):
        home = tmp_path / f"home{attempt}"
        home.mkdir()
        env = dict(os.environ, ARI_HOME=str(home))
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", code],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for _ in range(4)
        ]
        said = [p.communicate(timeout=300) for p in procs]
        assert all(p.returncode == 0 for p in procs), [err.decode() for _, err in said]
        assert all(out.split()[-1] == b"False" for out, _ in said), said
        assert not [n for n in os.listdir(home) if n.endswith(".tmp")]


def test_without_gensim_the_error_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from toolkit.text import corpus

    monkeypatch.setenv("ARI_HOME", str(tmp_path))
    monkeypatch.setattr(corpus, "SOURCE_PACKAGE", "no_such_package_ari")
    with pytest.raises(corpus.CorpusError, match=r"pip install gensim.*--train-data"):
        corpus.default_corpus_path()
    assert not list(tmp_path.iterdir())  # nothing half-written
