"""`toolkit view` in headless Chromium: the leaderboard of a results folder, rebuilt when a
result arrives, and a running run's live page (timeline of runner calls, submissions,
promotion, time left), refreshed while it runs; hostile agent text is shown, never run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cdp import Browser
from results_factory import run_dict, write_run
from site_fixture import make_fixture
from test_browser import start_browser

from toolkit.results.model import RunResult
from toolkit.run import journal, recovery
from toolkit.view import KEEP_SCROLL

pytestmark = [pytest.mark.browser, pytest.mark.slow]

HOSTILE = "<script>document.title='owned'</script><img src=x onerror=alert(1)>"


def _fake_running_run(home: Path, results: Path) -> str:
    """A run of this host that is going on (its harness: this test's process)."""
    run_id = "20261125T120000-model-a-s9-live"
    harness = home / "runs" / run_id / "harness"
    artifacts = results / "v1-test" / run_id
    artifacts.mkdir(parents=True)
    started = datetime.now(UTC) - timedelta(seconds=1200)
    skeleton = RunResult.model_validate(
        run_dict(run_id, seed=9, status="invalid", status_reason="running", passed=0)
    ).model_copy(update={"started_at": started})
    recovery.write_marker(
        harness,
        recovery.Marker(
            pid=os.getpid(),
            pid_start=recovery.process_start(os.getpid()),
            results_dir=str(results),
            artifacts=str(artifacts),
            skeleton=skeleton,
        ),
    )
    calls = [
        '{"argv": ["python", "train.py"], "start_s": 10.0, "end_s": 600.0, "exit_code": 0}',
        '{"argv": ["submit", "bundles/a"], "start_s": 610.0, "end_s": 640.0, "exit_code": 0}',
        '{"argv": ["python", "' + HOSTILE.replace('"', "'") + '"], "start_s": 700.0, '
        '"end_s": 720.0, "exit_code": 1}',
    ]
    (artifacts / "audit.jsonl").write_text("\n".join(calls) + "\n")
    history = [
        '{"kind": "submit", "id": "c001", "elapsed_s": 640.0}',
        '{"kind": "public", "id": "c001", "public_score": 35.0}',
        '{"kind": "promote", "id": "c001", "elapsed_s": 650.0}',
    ]
    (artifacts / "history.jsonl").write_text("\n".join(history) + "\n")
    (artifacts / "provider.jsonl").write_text(
        '{"kind": "call", "outcome": "answered", "usage": {"input": 1000, "output": 234}}\n'
        '{"kind": "probe", "outcome": "answered"}\n'
    )
    (artifacts / "agent.log").write_text(f"[  1.0s] started\n[ 700.0s] agent said {HOSTILE}\n")
    return run_id


@pytest.fixture
def view(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path, str]]:
    results, home = tmp_path / "results", tmp_path / "home"
    make_fixture(results)
    # This test's state folder, for this test only (the worker's own is shared by its tests).
    monkeypatch.setenv("ARI_HOME", str(home))
    run_id = _fake_running_run(home, results)
    env = {**os.environ, "ARI_HOME": str(home)}
    toolkit = str(Path(sys.executable).parent / "toolkit")
    server = subprocess.Popen(
        [toolkit, "view", "--results", str(results), "--port", "0"],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env,
    )  # fmt: skip
    try:
        assert server.stderr is not None
        line = server.stderr.readline()
        found = re.search(r"(http://127\.0\.0\.1:\d+/)", line)
        assert found, line
        yield found.group(1), results, run_id
    finally:
        server.terminate()
        server.wait(10)


def _open(browser: Browser, url: str) -> None:
    browser.call("Page.navigate", url=url)
    browser.wait_for("Page.loadEventFired")


def _wait_text(browser: Browser, url: str, needle: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while True:
        _open(browser, url)
        if needle in browser.evaluate("document.body.innerText"):
            return
        assert time.monotonic() < deadline, f"{url} never showed {needle!r}"
        time.sleep(1.0)


def test_the_live_view_in_a_browser(view: tuple[str, Path, str]) -> None:
    url, results, run_id = view
    browser = start_browser()
    try:
        for domain in ("Page", "Runtime"):
            browser.call(f"{domain}.enable")
        _open(browser, f"{url}live/")
        assert run_id in browser.evaluate("document.body.innerText")
        assert browser.evaluate("document.querySelector('td.running') !== null")
        _open(browser, f"{url}live/{run_id}")
        page = browser.evaluate(
            "({calls: document.querySelectorAll('svg.timeline rect.call').length,"
            " submits: document.querySelectorAll('svg.timeline circle.submit').length,"
            " promotes: document.querySelectorAll('svg.timeline path.promote').length,"
            " now: document.querySelectorAll('svg.timeline line.now').length,"
            " refresh: document.querySelector('meta[http-equiv=refresh]') !== null,"
            " scripts: [...document.querySelectorAll('script')].map(s => s.textContent),"
            " imgs: document.querySelectorAll('img').length,"
            " title: document.title, text: document.body.innerText,"
            " tips: [...document.querySelectorAll('svg.timeline title')].map(t => t.textContent)})"
        )
        assert page["calls"] == 3 and page["submits"] == 1 and page["promotes"] == 1
        assert page["now"] == 1 and page["refresh"]
        assert any("public 35.0%" in t for t in page["tips"]), page["tips"]
        # No script but the page's own scroll keeper (the only one its policy lets run).
        assert page["scripts"] == [KEEP_SCROLL] and page["imgs"] == 0 and page["title"] != "owned"
        assert "<script>" in page["text"]  # shown as text
        assert re.search(r"\d+ s left", page["text"])
        assert "model calls 1 · tokens 1,234" in page["text"]
        # The leaderboard of the folder, then rebuilt when a new result arrives.
        _wait_text(browser, f"{url}leaderboards/v1-test.html", "gpt-x")
        write_run(results, run_dict("brand-new-0", model="brand-new-model", seed=0))
        _wait_text(browser, f"{url}leaderboards/v1-test.html", "brand-new-model")
    finally:
        browser.close()
    # The run ended: its page stops refreshing.
    marker = Path(journal.find(run_id).harness) / recovery.MARKER
    marker.unlink()


# -- issue 29 item 4: the reserved window, the call in flight, grading, the score -------------


def _png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB(A) bytes) of an 8-bit, non-interlaced PNG (Chromium's)."""
    import struct
    import zlib

    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6), (depth, colour)
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride, rows, prev = zlib.decompress(idat), width * channels, [], bytes(width * channels)
    for y in range(height):
        kind, line = (
            raw[y * (stride + 1)],
            bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)]),
        )
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b, c = prev[i], prev[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = bytes(line)
    return width, height, [bytes(r[i] for i in range(len(r)) if i % channels < 3) for r in rows]


def _columns_of(rows: list[bytes], rgb: tuple[int, int, int]) -> set[int]:
    """The x of every pixel of exactly this colour."""
    want = bytes(rgb)
    return {i // 3 for row in rows for i in range(0, len(row), 3) if row[i : i + 3] == want}


def _live_run(home: Path, results: Path, run_id: str, grading: bool) -> None:
    """A run going on (harness: this process) with a 300 s reserved window in its effective
    config, and live.json saying what it does now."""
    from toolkit.run.live import LiveFile

    harness = home / "runs" / run_id / "harness"
    artifacts = results / "v1-test" / run_id
    artifacts.mkdir(parents=True)
    run = run_dict(run_id, seed=7, status="invalid", status_reason="running", passed=0)
    run["config"]["budget"] = {"budget_s": 3600, "per_call_limit_s": 1200, "reserved_s": 300}
    skeleton = RunResult.model_validate(run).model_copy(
        update={"started_at": datetime.now(UTC) - timedelta(seconds=1800)}
    )
    recovery.write_marker(
        harness,
        recovery.Marker(
            pid=os.getpid(), pid_start=recovery.process_start(os.getpid()),
            results_dir=str(results), artifacts=str(artifacts), skeleton=skeleton,
        ),
    )  # fmt: skip
    (artifacts / "audit.jsonl").write_text(
        '{"argv": ["python", "prep.py"], "start_s": 5.0, "end_s": 60.0, "exit_code": 0}\n'
    )
    (artifacts / "transcript.txt").write_text("agent console: training the long run now\n")
    (artifacts / "agent.log").write_text("[  1.0s] " + "x" * 3000 + "\n")  # one very long line
    live = LiveFile(harness, ("transcript.txt",))
    step = "the final grading of c001" if grading else "the agent's session"
    live.update(step, [] if grading else [(1000.0, ["python", "train.py", "--long"])])


def test_the_reserved_window_the_call_in_flight_grading_and_the_score(
    view: tuple[str, Path, str], tmp_path: Path
) -> None:
    url, results, _ = view
    home = Path(os.environ["ARI_HOME"])
    _live_run(home, results, "20261125T130000-model-a-s7-live", grading=False)
    _live_run(home, results, "20261125T130500-model-a-s8-grading", grading=True)
    done = run_dict("20261125T110000-model-a-s6-done", seed=6, passed=42, bpb=1.25)
    write_run(results, done)
    journal.append(
        journal.Entry(
            run_id=done["run_id"], track="v1-test", model="model-a", effort=None, seed=6,
            agent="opencode", started_at=datetime.now(UTC) - timedelta(hours=2), budget_s=3600,
            harness=str(home / "runs" / "gone" / "harness"), artifacts=str(tmp_path / "none"),
            results_dir=str(results),
        )
    )  # fmt: skip
    browser = start_browser()
    try:
        for domain in ("Page", "Runtime"):
            browser.call(f"{domain}.enable")
        browser.call("Emulation.setDeviceMetricsOverride", width=1200, height=900,
                     deviceScaleFactor=1, mobile=False)  # fmt: skip
        _open(browser, f"{url}live/20261125T130000-model-a-s7-live")
        page = browser.evaluate(
            "({live: document.querySelectorAll('svg.timeline rect.call.live').length,"
            " reserved: document.querySelectorAll('svg.timeline rect.reserved').length,"
            " text: document.body.innerText, wide: document.documentElement.scrollWidth,"
            " box: (() => { const r = document.querySelector('svg.timeline')"
            ".getBoundingClientRect(); return {x: r.x, y: r.y, w: r.width, h: r.height}; })()})"
        )
        assert page["live"] == 1 and page["reserved"] == 1, page
        assert "python train.py --long" in page["text"] and "so far" in page["text"]
        assert "agent console: training the long run now" in page["text"]
        assert "reserved window (300 s" in page["text"]
        assert page["wide"] <= 1200, "the harness log pushes the page sideways"
        box = page["box"]
        shot = browser.call(
            "Page.captureScreenshot", format="png",
            clip={"x": box["x"], "y": box["y"], "width": box["w"], "height": box["h"], "scale": 1},
        )  # fmt: skip
        import base64

        png = base64.b64decode(shot["data"])
        shots = Path(os.environ.get("ARI_SCREENSHOT_DIR") or tmp_path)
        shots.mkdir(parents=True, exist_ok=True)
        (shots / "live-timeline.png").write_bytes(png)
        whole = browser.call("Page.captureScreenshot", format="png")
        (shots / "live-page.png").write_bytes(base64.b64decode(whole["data"]))
        width, _, rows = _png_pixels(png)
        pink = _columns_of(rows, (0xFF, 0xDD, 0xDD))  # the reserved window
        call = _columns_of(rows, (0x88, 0xBB, 0xDD))  # the call in flight
        # 300 s of 3600 at the right end; the call from 1000 s to now (1800 s).
        assert pink and min(pink) >= width * (3300 / 3600) - 3 and max(pink) >= width - 3, pink
        assert call and abs(min(call) - width * 1000 / 3600) < 6, sorted(call)[:3]
        assert abs(max(call) - width * 1800 / 3600) < 8, sorted(call)[-3:]
        _open(browser, f"{url}live/20261125T130500-model-a-s8-grading")
        text = browser.evaluate("document.body.innerText")
        assert "state grading" in text and "s left" not in text
        _open(browser, f"{url}live/{done['run_id']}")
        text = browser.evaluate("document.body.innerText")
        assert "42.0% (42/100)" in text and "s left" not in text and "used" in text
        _open(browser, f"{url}live/")
        assert browser.evaluate("document.querySelector('td.grading') !== null")
        _wait_text(browser, f"{url}index.html", "runs on this host (live)")
        assert browser.evaluate("document.querySelector('a.ari-live-link').href").endswith("/live/")
    finally:
        browser.close()
