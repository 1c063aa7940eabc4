"""The live view's words and marks (issue 39, an operator's day): a finished run's timeline has
no *now* line, the axis is marked between 0 and the budget, and the list of this host's runs
shows each finished run's score. No browser: the pages' HTML."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from toolkit import view
from toolkit.run import journal
from toolkit.view import timeline


def _finished_run(tmp_path: Path, percent: float) -> journal.Entry:
    results = tmp_path / "results"
    entry = journal.Entry(
        run_id="20261128T120000-scripted-baseline-s0-abcd", track="demo-cpu-3",
        model="scripted-baseline", effort=None, seed=0, agent="scripted",
        started_at=datetime(2026, 11, 28, 12, tzinfo=UTC), budget_s=300.0,
        harness=str(tmp_path / "home" / "runs" / "x" / "harness"),
        artifacts=str(results / "demo-cpu-3" / "x"), results_dir=str(results),
    )  # fmt: skip
    entry.result_path.parent.mkdir(parents=True)
    entry.result_path.write_text(
        json.dumps({"status": "valid", "score": {"percent": percent}, "timings": {"used_s": 155.5}})
    )
    return entry


def test_axis_ticks_mark_round_times_between_0_and_the_budget() -> None:
    assert timeline.axis_ticks(300) == [0, 60, 120, 180, 240, 300]
    hour = timeline.axis_ticks(3600)
    assert hour[0] == 0 and hour[-1] == 3600 and len(hour) <= timeline.MAX_TICKS + 1
    assert all(b - a == 600 for a, b in itertools.pairwise(hour))
    assert timeline.axis_ticks(310)[-2:] == [240, 310]  # no mark crowding the end


def test_a_finished_run_has_no_now_and_its_axis_is_marked(tmp_path: Path) -> None:
    entry = _finished_run(tmp_path, 5.0)
    done = timeline.timeline_svg(entry, 155.5, 30.0, live=False)
    assert 'class="now"' not in done
    assert done.count('<text class="tick"') == 6 and ">2 min<" in done
    assert 'class="now"' in timeline.timeline_svg(entry, 100.0, 30.0, live=True)


def test_the_run_list_shows_scores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARI_HOME", str(tmp_path / "home"))
    entry = _finished_run(tmp_path, 5.0)
    journal.append(entry)
    page = view.live_index().decode()
    assert "<th>score</th>" in page and "<td>5.0%</td>" in page


def test_a_grading_run_says_when_its_session_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The view said "session over at 182 s" (the time since the harness started) for a
    session that ended at 155.5 s (the clock the result reports as used)."""
    from site_fixture import run_dict  # the results factory of the site tests

    from toolkit.results.model import RunResult
    from toolkit.run import recovery
    from toolkit.run.live import LiveFile

    monkeypatch.setenv("ARI_HOME", str(tmp_path / "home"))
    entry = _finished_run(tmp_path, 0.0)
    entry.result_path.unlink()  # not published yet: grading
    entry = entry.model_copy(update={"started_at": datetime.now(UTC) - timedelta(seconds=182)})
    harness = Path(entry.harness)
    skeleton = RunResult.model_validate(run_dict(entry.run_id, status="invalid", passed=0))
    recovery.write_marker(
        harness,
        recovery.Marker(
            pid=os.getpid(), pid_start=recovery.process_start(os.getpid()),
            results_dir=entry.results_dir, artifacts=entry.artifacts, skeleton=skeleton,
        ),
    )  # fmt: skip
    LiveFile(harness).update("the final grading of c001", [], session_s=155.5)
    journal.append(entry)
    page = (view.live_run(entry.run_id) or b"").decode()
    assert "session over at <b>155.5 s</b>" in page, page[:2000]
    assert 'class="now"' in page  # still live: grading


# The live page's scroll keeper, run by node in a stand-in of a browser page: three loads of
# one page (each a refresh), the reader scrolling in between.
KEEPER_HARNESS = r"""
const vm = require("vm");
const script = require("fs").readFileSync(process.argv[2], "utf8");
const store = {};
function load(height) {
  const boxes = [{scrollTop: 0, scrollHeight: height, clientHeight: 100}];
  const on = {};
  const win = {scrollY: 0, scrollTo(x, y) { this.scrollY = y; },
               addEventListener(name, f) { on[name] = f; }};
  vm.runInNewContext(script, {
    document: {querySelectorAll: () => boxes}, window: win, location: {pathname: "/live/r"},
    sessionStorage: {getItem: (k) => (k in store ? store[k] : null),
                     setItem: (k, v) => { store[k] = v; }},
  });
  return {box: boxes[0], win, on};
}
const out = {};
let p = load(1000);
out.first = p.box.scrollTop;
p.box.scrollTop = 300; p.win.scrollY = 50; p.on.pagehide();
p = load(1200);
out.kept = p.box.scrollTop; out.page = p.win.scrollY;
p.box.scrollTop = 1100; p.on.pagehide();
p = load(1500);
out.follows = p.box.scrollTop;
console.log(JSON.stringify(out));
"""


def test_a_refresh_keeps_the_console_where_the_reader_left_it(tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (scripts/test-setup.sh installs it for opencode)")
    script, harness = tmp_path / "keep.js", tmp_path / "harness.js"
    script.write_text(view.KEEP_SCROLL)
    harness.write_text(KEEPER_HARNESS)
    done = subprocess.run([node, str(harness), str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    # New page: at the end; scrolled up: kept, and the page's own scroll; at the end: follows.
    assert json.loads(done.stdout) == {"first": 1000, "kept": 300, "page": 50, "follows": 1500}
    assert view.KEEP_SCROLL in view.live_index().decode()


def test_the_live_pages_run_no_script_but_the_scroll_keeper(tmp_path: Path) -> None:
    """The live pages show the agent's text: their policy names the one script they may run
    by its hash, which must be the hash of the script as the page holds it."""
    import base64
    import hashlib
    import http.server
    import threading
    import urllib.request

    page = view.live_index().decode()
    script = page.split("<script>", 1)[1].split("</script>", 1)[0]
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" == view.LIVE_POLICY
    handler = type("TestHandler", (view.Handler,), {"site_dir": tmp_path})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/live/"
        with urllib.request.urlopen(url, timeout=30) as answer:
            assert answer.headers["Content-Security-Policy"] == view.LIVE_POLICY
    finally:
        httpd.shutdown()
