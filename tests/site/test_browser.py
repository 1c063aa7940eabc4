"""Headless Chromium opens the built leaderboard: rows in rank order, chart drawn, a row link
opens its page, no console errors; a screenshot is saved (for people to look at)."""

from __future__ import annotations

import base64
import functools
import http.server
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cdp import Browser, BrowserUnavailable
from site_fixture import EXPECTED_ORDER

pytestmark = [pytest.mark.browser, pytest.mark.slow]


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server(built_site: Path) -> Iterator[str]:
    """The built site over HTTP on 127.0.0.1 (a free port), in a thread."""
    handler = functools.partial(_QuietHandler, directory=str(built_site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def browser() -> Iterator[Browser]:
    try:
        b = Browser()
    except BrowserUnavailable as exc:
        pytest.skip(f"headless Chromium unavailable: {exc}")
    try:
        for domain in ("Page", "Runtime", "Log"):
            b.call(f"{domain}.enable")
        b.call("Emulation.setDeviceMetricsOverride", width=1280, height=900,
               deviceScaleFactor=1, mobile=False)  # fmt: skip
        yield b
    finally:
        b.close()


def _open(browser: Browser, url: str) -> None:
    browser.call("Page.navigate", url=url)
    browser.wait_for("Page.loadEventFired")


def test_leaderboard_in_a_browser(
    browser: Browser, server: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    _open(browser, f"{server}/leaderboards/v1-test.html")
    rows = browser.evaluate(
        "[...document.querySelectorAll('table.ari-board:not(.ari-board--legacy) tr.ari-row')]"
        ".map(tr => [tr.querySelector('.ari-rank').textContent.trim(),"
        " tr.querySelector('a.ari-row-link').textContent.trim()])"
    )
    assert [tuple(r) for r in rows] == EXPECTED_ORDER

    chart = browser.evaluate(
        "(() => { const s = document.querySelector('svg.ari-means');"
        " const dots = [...s.querySelectorAll('circle.dot')];"
        " return {width: s.getBoundingClientRect().width,"
        "  dots: dots.length, drawn: dots.filter(d => d.getBoundingClientRect().width > 0).length,"
        "  xs: dots.map(d => d.getBoundingClientRect().x)}; })()"
    )
    assert chart["width"] > 400 and chart["dots"] == 5 and chart["drawn"] == 5
    assert chart["xs"][0] > chart["xs"][3]  # the best mean is drawn right of the worst

    shots = Path(os.environ.get("ARI_SCREENSHOT_DIR") or tmp_path_factory.mktemp("shots"))
    shots.mkdir(parents=True, exist_ok=True)
    size = browser.call("Page.getLayoutMetrics")["cssContentSize"]
    png = browser.call(
        "Page.captureScreenshot", format="png", captureBeyondViewport=True,
        clip={"x": 0, "y": 0, "width": 1280, "height": min(size["height"], 4000), "scale": 1},
    )  # fmt: skip
    shot = shots / "leaderboard.png"
    shot.write_bytes(base64.b64decode(png["data"]))
    assert shot.stat().st_size > 10_000
    print(f"screenshot: {shot}")

    browser.evaluate("document.querySelector('a.ari-row-link').click()")
    browser.wait_for("Page.loadEventFired")
    where = browser.evaluate("[location.pathname, document.querySelector('h1').textContent]")
    assert where[0] == "/rows/v1-test/gpt-x-high.html"
    assert where[1].startswith("gpt-x")
    assert browser.evaluate("document.querySelectorAll('svg.ari-timeline').length") == 3

    assert browser.errors() == []
