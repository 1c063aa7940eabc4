"""Text from a results folder, made plain text for the site's markdown pages.

Every string a page shows from `results/` (a track's title, a fix's description, a run's
model, agent or effort, a refused file's line) is someone else's text: a pull request can put
anything there. The site's pages are markdown with `attr_list`, so text that markdown reads
(`![x](y){: onerror=...}`, `[x](javascript:...)`, a heading, a table cell break) would become
markup and script. So the site's templates escape every value at one place, the boundary
where data enters a page (`site/hooks.py` installs `markdown_text` as jinja's `finalize`):

- HTML's specials (`& < > " '`) are escaped as jinja escapes them, so no tag or attribute
  can be made of it;
- markdown's specials wherever they stand (`\\ ` * { } [ ] | ~`, and `_` but inside a word:
  escapes, code, emphasis, attribute lists, links and images, table cells) and a heading's
  closing hashes become numeric character references (`&#91;` for `[`): markdown leaves a
  character reference as it is, and the browser shows the character, so the text reads the
  same;
- every line break and every character that is not printable is encoded too, so a value is
  one line of markdown, and what only starts a block at the start of a line (leading spaces,
  a list's `- ` or `1. `, a rule or underline's `---` or `===`, an admonition's `!!!`, a heading's
  `#`) is encoded where a value starts, since a template may put it there.

Numbers and values already marked safe (`markupsafe.Markup`: the output of the site's own
macros and filters) pass unchanged. The two places where a template puts a value inside
markdown syntax of its own take it through a checking filter instead: `site_path` (a link's
destination: a relative path of the site, nothing else) and `anchor` (an id in `{: #id }`).
"""

from __future__ import annotations

import re

import markupsafe

_MARKDOWN = {ord(c): f"&#{ord(c)};" for c in "\\`*{}[]|~"}
# `_` makes emphasis only beside something other than a letter or digit (`_x_`, `__x__`);
# inside a word (`promoted_code`) markdown leaves it, and so do we.
_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
_HTML = {
    ord("&"): "&amp;",
    ord("<"): "&lt;",
    ord(">"): "&gt;",
    ord('"'): "&#34;",
    ord("'"): "&#39;",
}
_CONTROLS = {c: f"&#{c};" for c in [*range(32), 127]}
_TABLE = {**_MARKDOWN, **_HTML, **_CONTROLS}
# Characters beyond ASCII that are not printable (C1 controls, line and paragraph separators,
# zero-width and direction marks, the byte order mark): encoded too.
_ODD = re.compile(r"[^\x00-\x7f]")
# A heading's closing hashes, which markdown drops: encoded where a value ends.
_CLOSING = re.compile(r"#+$")
# What starts a block only at the start of a line: encoded where a value starts.
_LINE_START = re.compile(r"^(?: (?= )|#|[-+=:!](?=[\s\-+=:!]|$)|\d+[.)](?=\s|$))")
_SITE_PATH = re.compile(r"^(?:\.\./)*[A-Za-z0-9_.~/-]*(?:#[A-Za-z0-9_.-]+)?$")
_ANCHOR = re.compile(r"^[A-Za-z0-9_.-]+$")


def _odd(match: re.Match[str]) -> str:
    char = match.group()
    return char if char.isprintable() else f"&#{ord(char)};"


def markdown_text(value: object) -> object:
    """`value` as it goes into a markdown page: plain text (see the module doc), marked safe
    so jinja's autoescape does not escape it again; numbers and `Markup` unchanged."""
    if isinstance(value, markupsafe.Markup | int | float) or value is None:
        return value
    text = _ODD.sub(_odd, str(value).translate(_TABLE))
    text = _UNDERSCORE.sub("&#95;", text)
    text = _LINE_START.sub(_line_start, text, count=1)
    text = _CLOSING.sub(lambda m: "&#35;" * len(m.group()), text)
    return markupsafe.Markup(text)


def _line_start(match: re.Match[str]) -> str:
    """A leading block marker, encoded: its character, or a list number's `.` or `)`."""
    found = match.group()
    return f"{found[:-1]}&#{ord(found[-1])};"


def site_path(value: object) -> markupsafe.Markup:
    """A link destination inside the site (`../rows/t/x.md#run-1`), checked: a relative path
    of plain characters, no scheme, no `..` but leading ones. Anything else is our bug (ids
    that become paths are checked when they are loaded), so it raises."""
    text = str(value)
    inner = re.sub(r"^(?:\.\./)*", "", text)
    if not _SITE_PATH.match(text) or ".." in inner.split("#")[0].split("/"):
        raise ValueError(f"not a path of the site: {text!r}")
    return markupsafe.Markup(text)


def anchor(value: object) -> markupsafe.Markup:
    """An element id for markdown's `{: #id }` (a run id, a fix id), checked to be one."""
    text = str(value)
    if not _ANCHOR.match(text):
        raise ValueError(f"not an anchor: {text!r}")
    return markupsafe.Markup(text)
