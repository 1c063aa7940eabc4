"""The default training corpus: ordinary English prose that installs offline.

Source: the gensim wheel on PyPI ships, as test data, a shortened dump of English Wikipedia
articles (`enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2`, about 200
articles from April 2016: Anarchism, Autism, Albedo, ...). Wikipedia text is licensed under
CC BY-SA 3.0 (https://creativecommons.org/licenses/by-sa/3.0/); the extracted text keeps that
licence. We strip the wiki markup here, with our own small parser, into plain paragraphs.

It is small (a few MB): enough for the demo, the tests and the exam's context-free baseline.
A real run points `--train-data` at a large corpus instead (see the README).
"""

from __future__ import annotations

import bz2
import html
import importlib.util
import os
import re
import tempfile
from pathlib import Path

from toolkit.paths import state_dir

SOURCE_PACKAGE = "gensim"
SOURCE_FILE = "test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
LICENSE = "CC BY-SA 3.0 (English Wikipedia text, shipped as test data in the gensim wheel)"
CACHE_NAME = "default-corpus-v1.txt"

_TEXT = re.compile(r"<text[^>]*>(.*?)</text>", re.S)
_TITLE = re.compile(r"<title>(.*?)</title>")
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_REF = re.compile(r"<ref[^>/]*/>|<ref[^>]*>.*?</ref>", re.S | re.I)
_TAG = re.compile(r"</?[a-zA-Z][^>]*>")
_LINK = re.compile(r"\[\[([^\[\]|]*\|)?([^\[\]]*)\]\]")
_EXTERNAL = re.compile(r"\[(?:https?|ftp)://[^\s\]]+\s*([^\]]*)\]")
_HEADING = re.compile(r"^=+\s*(.*?)\s*=+\s*$", re.M)
_SKIP_LINK = re.compile(r"\[\[(?:File|Image|Category|[a-z]{2,3}(?:-[a-z]+)?):", re.I)


class CorpusError(RuntimeError):
    """The default corpus could not be found or read."""


def _drop_balanced(text: str, open_: str, close: str) -> str:
    """Remove every (possibly nested) `open_ ... close` region, e.g. `{{templates}}`."""
    token = re.compile(re.escape(open_) + "|" + re.escape(close))
    out: list[str] = []
    depth = 0
    start = 0
    for m in token.finditer(text):
        if m.group() == open_:
            if depth == 0:
                out.append(text[start : m.start()])
            depth += 1
        elif depth:
            depth -= 1
            if depth == 0:
                start = m.end()
    if depth == 0:
        out.append(text[start:])
    return "".join(out)


def _drop_links_to(text: str) -> str:
    """Remove `[[File:...]]`, `[[Category:...]]` and interlanguage links, nested ones included."""
    while True:
        m = _SKIP_LINK.search(text)
        if not m:
            return text
        depth, i = 0, m.start()
        while i < len(text):
            if text.startswith("[[", i):
                depth += 1
                i += 2
            elif text.startswith("]]", i):
                depth -= 1
                i += 2
                if depth == 0:
                    break
            else:
                i += 1
        text = text[: m.start()] + text[i:]


def wiki_to_text(markup: str) -> str:
    """Turn one article's wiki markup into plain paragraphs of prose."""
    text = html.unescape(markup)
    text = _COMMENT.sub("", text)
    text = _REF.sub("", text)
    text = _drop_balanced(text, "{{", "}}")
    text = _drop_balanced(text, "{|", "|}")
    text = _drop_links_to(text)
    text = _LINK.sub(r"\2", text)
    text = _EXTERNAL.sub(r"\1", text)
    text = _HEADING.sub(r"\1", text)
    text = _TAG.sub("", text)
    text = text.replace("'''", "").replace("''", "")
    paragraphs = []
    for line in text.splitlines():
        line = re.sub(r"\s+", " ", line).strip()
        # Keep prose: skip list/table debris and very short fragments.
        if len(line) >= 60 and not line.startswith(("*", "#", ":", ";", "|", "!")):
            paragraphs.append(line)
    return "\n".join(paragraphs)


def extract_articles(xml: str) -> list[tuple[str, str]]:
    """(title, plain text) for every non-redirect article in a MediaWiki XML dump."""
    articles = []
    for page in xml.split("<page>")[1:]:
        title = _TITLE.search(page)
        body = _TEXT.search(page)
        if not title or not body or body.group(1).lstrip().upper().startswith("#REDIRECT"):
            continue
        text = wiki_to_text(body.group(1))
        if text:
            articles.append((html.unescape(title.group(1)), text))
    return articles


def _source_path() -> Path:
    """The dump inside the installed gensim, found without importing gensim: its import
    (numpy, scipy, smart_open...) took 1.0 of the 1.7 CPU seconds of an extraction, paid by
    each fresh state dir (a new operator, each test home, each campaign box)."""
    spec = importlib.util.find_spec(SOURCE_PACKAGE)
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    if not folders:
        raise CorpusError(
            "the default corpus needs the 'gensim' package (pip install gensim), "
            "or pass --train-data with your own text"
        )
    path = Path(folders[0]) / SOURCE_FILE
    if not path.is_file():
        raise CorpusError(f"default corpus file not found in the installed gensim: {path}")
    return path


def default_corpus_path() -> Path:
    """Path of the default corpus as UTF-8 plain text, extracted once into the state dir."""
    cached = state_dir() / CACHE_NAME
    if cached.is_file():
        return cached
    xml = bz2.decompress(_source_path().read_bytes()).decode("utf-8")
    text = "\n\n".join(f"{title}\n{body}" for title, body in extract_articles(xml)) + "\n"
    # A temporary file of this process's own: two processes extracting into one state dir at
    # once (a campaign's runs on one box) must not write into, or move away, each other's.
    fd, name = tempfile.mkstemp(dir=cached.parent, prefix=f".{CACHE_NAME}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(name, cached)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
    return cached


def default_corpus() -> bytes:
    """The default corpus as bytes."""
    return default_corpus_path().read_bytes()
