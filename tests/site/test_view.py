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

from toolkit.results import RunResult
from toolkit.run import journal, recovery

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
    os.environ["ARI_HOME"] = str(home)
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
def view(tmp_path: Path) -> Iterator[tuple[str, Path, str]]:
    results, home = tmp_path / "results", tmp_path / "home"
    make_fixture(results)
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
            " scripts: document.querySelectorAll('script').length,"
            " imgs: document.querySelectorAll('img').length,"
            " title: document.title, text: document.body.innerText,"
            " tips: [...document.querySelectorAll('svg.timeline title')].map(t => t.textContent)})"
        )
        assert page["calls"] == 3 and page["submits"] == 1 and page["promotes"] == 1
        assert page["now"] == 1 and page["refresh"]
        assert any("public 35.0%" in t for t in page["tips"]), page["tips"]
        assert page["scripts"] == 0 and page["imgs"] == 0 and page["title"] != "owned"
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
