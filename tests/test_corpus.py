"""The default corpus: real English prose, extracted from wiki markup."""

from __future__ import annotations

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
    assert max(set(words[:50000]), key=words[:50000].count) == "the"
