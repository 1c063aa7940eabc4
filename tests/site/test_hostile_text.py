"""Issue 50 item 1: text from a results folder reaches the pages as text, never as markup.

The folder of `hostile_fixture` holds an attack in every string of every file and of the
registry (and in the artifacts). The site is built from it (the bad file skipped and listed)
and every page of it is opened in headless Chromium, once with the pages' Content-Security-
Policy switched off (the escape must hold alone) and once with it: no payload ran, none made
an element, an event handler or a `javascript:` link, and each page says it is the page of
text it is. Every page carries a policy that allows no inline script but the theme's own, and
`toolkit view` serves pages with it and every other file (a raw artifact) with a strict one.
"""

from __future__ import annotations

import http.server
import json
import re
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from cdp import Browser
from hostile_fixture import make_hostile
from site_fixture import build
from test_browser import start_browser

from toolkit.site_policy import FILE_POLICY, inline_scripts, policy_of
from toolkit.view import Handler

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# What a page shows when an attack became markup: an event handler, a script or a link that
# runs script, a frame, an attack's call in an attribute that loads or runs something.
_FOUND = """(() => {
  const bad = [];
  for (const el of document.querySelectorAll('*')) {
    for (const a of el.attributes) {
      const n = a.name.toLowerCase(), v = a.value;
      if (n.startsWith('on')) bad.push(el.tagName + ' ' + n + '=' + v.slice(0, 40));
      if (['href', 'src', 'srcdoc', 'action', 'formaction', 'data', 'xlink:href'].includes(n)
          && /^\\s*javascript:|__pwn\\(/i.test(v)) bad.push(el.tagName + ' ' + n);
    }
    if (el.tagName === 'SCRIPT' && el.textContent.includes('__pwn(')) bad.push('SCRIPT');
    if (['IFRAME', 'OBJECT', 'EMBED', 'FRAME'].includes(el.tagName)) bad.push(el.tagName);
  }
  return {bad: bad, ran: window.__pwned || [],
          shown: document.documentElement.textContent.includes('__pwn(')};
})()"""


@pytest.fixture(scope="module")
def hostile_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile")
    make_hostile(root / "results")
    done = build(root / "results", root / "public", extra_env={"ARI_SKIP_BAD_RESULTS": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    return root / "public"


@pytest.fixture(scope="module")
def server(hostile_site: Path) -> Iterator[str]:
    """The built site, served by `toolkit view`'s handler (pages and files as it serves them)."""
    handler = type("H", (Handler,), {"site_dir": hostile_site})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def _pages(site: Path) -> list[str]:
    return sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html"))


def test_every_page_carries_a_policy_naming_only_its_own_scripts(hostile_site: Path) -> None:
    pages = _pages(hostile_site)
    assert len(pages) > 20
    for name in pages:
        page = (hostile_site / name).read_bytes()
        policy = policy_of(page)
        assert policy is not None, f"{name}: no Content-Security-Policy"
        scripts = re.search(r"script-src ([^;]*)", policy)
        assert scripts and "unsafe" not in scripts.group(1) and "default-src 'self'" in policy
        assert page.index(b"Content-Security-Policy") < page.find(b"<script") or (
            b"<script" not in page
        ), name
        for source in inline_scripts(page.decode()):
            assert source in scripts.group(1), f"{name}: an inline script the policy names not"


def test_the_search_index_holds_the_attacks_as_text(hostile_site: Path) -> None:
    """The theme's search shows the index's text as HTML: no attack may be a tag there."""
    index = json.loads((hostile_site / "search" / "search_index.json").read_text())
    texts = [doc["title"] + doc["text"] for doc in index["docs"]]
    assert any("__pwn(" in t for t in texts)
    assert not [t for t in texts if re.search(r"<[^>]*(__pwn|javascript:)", t)]


def test_no_raw_artifact_is_served_as_a_page(hostile_site: Path) -> None:
    raws = [p for p in (hostile_site / "runs").rglob("*") if p.is_file()]
    assert raws and all(p.suffix in (".txt", ".log", ".json", ".jsonl", ".csv") for p in raws)
    assert any(p.name == "page.html.txt" for p in raws)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    b = start_browser()
    try:
        for domain in ("Page", "Runtime", "Log"):
            b.call(f"{domain}.enable")
        # Records any payload that runs, on every page before its own scripts.
        b.call(
            "Page.addScriptToEvaluateOnNewDocument",
            source="window.__pwned = []; window.__pwn = n => window.__pwned.push(n);",
        )
        yield b
    finally:
        b.close()


@pytest.mark.parametrize("csp", ["off", "on"])
def test_no_payload_runs_or_makes_markup(browser: Browser, server: str, hostile_site: Path,
                                         csp: str) -> None:  # fmt: skip
    browser.call("Page.setBypassCSP", enabled=csp == "off")
    shown = []
    for name in _pages(hostile_site):
        browser.call("Page.navigate", url=f"{server}/{name}")
        browser.wait_for("Page.loadEventFired")
        found = browser.evaluate(_FOUND)
        assert found["bad"] == [] and found["ran"] == [], (name, found)
        if found["shown"]:
            shown.append(name)
    # The attacks are on the pages, as text: the home page, the boards, the fixes, the row
    # pages (signed, unsigned, legacy), the log pages and the refused files.
    for page in ("index.html", "leaderboards/v1-test.html", "protocol-fixes.html",
                 "refused.html", "methodology.html"):  # fmt: skip
        assert page in shown, page
    rows = [p for p in _pages(hostile_site) if p.startswith("rows/")]
    assert len(rows) >= 3 and all(p in shown for p in rows)
    assert any(p.startswith("logs/") for p in shown)
    if csp == "on":  # the theme's own scripts all ran: none was refused by the policy
        assert [e for e in browser.errors() if "Content Security Policy" in e] == []


def test_the_view_sends_the_policy(server: str, hostile_site: Path) -> None:
    with urllib.request.urlopen(f"{server}/index.html") as reply:
        page = reply.read()
        assert reply.headers["Content-Security-Policy"] == policy_of(page)
    raw = next(p for p in (hostile_site / "runs").rglob("*.txt"))
    with urllib.request.urlopen(f"{server}/{raw.relative_to(hostile_site).as_posix()}") as reply:
        assert reply.headers["Content-Security-Policy"] == FILE_POLICY
        assert reply.headers["X-Content-Type-Options"] == "nosniff"
