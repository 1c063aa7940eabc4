"""What the leaderboard site's pages may run: their Content-Security-Policy.

The site shows text from results folders that anyone can send (`toolkit.stats.untrusted`
keeps it plain text). Should some of it still become markup, the policy is the second wall:
no inline script runs but the theme's own, each named by its SHA-256, no script loads from
anywhere but the site, no plugin, no `<base>`, no form. Styles may be inline (the theme and
the charts set them; a style runs nothing).

The built site carries the policy in a `<meta>` tag at the top of every page's `<head>`
(`site/overrides/main.html`, and the log pages' own template); `toolkit view` sends it as a
header too, and a strict one (`FILE_POLICY`) with every other file it serves (a raw artifact
is someone else's bytes, whatever its name says).
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable

_INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)([^>]*)>(.*?)</script>", re.DOTALL)
_META = re.compile(rb'<meta http-equiv="Content-Security-Policy" content="([^"]*)">')

PAGE_DIRECTIVES = (
    "default-src 'self'",
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "font-src 'self' data:",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'none'",
)
NO_SCRIPT_POLICY = "; ".join([*PAGE_DIRECTIVES, "script-src 'none'"])
"""For a page that runs no script at all (the log pages)."""
FILE_POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; sandbox"
"""For a file that is not a page of the site (a raw artifact, an image): nothing runs."""


def script_hash(body: str) -> str:
    """The CSP source naming one inline script by its exact text."""
    digest = hashlib.sha256(body.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode()}'"


def inline_scripts(html: str) -> list[str]:
    """The hash sources of the inline scripts of `html` that a browser runs (a script of
    type `application/json` is data and needs none)."""
    found = []
    for attrs, body in _INLINE_SCRIPT.findall(html):
        if "application/json" not in attrs:
            found.append(script_hash(body))
    return found


def page_policy(script_hashes: Iterable[str]) -> str:
    """The policy of a page: scripts from the site itself and the inline ones named."""
    scripts = " ".join(["'self'", *sorted(set(script_hashes))])
    return "; ".join([*PAGE_DIRECTIVES, f"script-src {scripts}"])


def policy_of(page: bytes) -> str | None:
    """The policy a built page carries in its `<meta>` tag; None when it has none."""
    found = _META.search(page[:8192])
    return found.group(1).decode("utf-8", "replace").replace("&#39;", "'") if found else None
