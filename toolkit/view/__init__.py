"""`toolkit view`: a live local web view of a results folder and of the runs going on.

Two parts, served on one local port:

- `/` : the leaderboard site of the results folder (`mkdocs build` of the checkout's site with
  `ARI_RESULTS_DIR` set), rebuilt in the background whenever a result file or the registry
  changes, so finished runs appear on the board while you watch. A bad result file (or one
  with a link on its path) costs its own row only: it is built with `ARI_SKIP_BAD_RESULTS=1`,
  and the site lists each refused file with its reason;
- `/live/` : every run of this host (the journal of `toolkit runs list`), and per run a page
  with the hour on one line: the runner calls on the clock (a call in flight drawn up to
  *now*), the submissions with their public scores, the promotion, the reserved window and
  *now*, the time left; then the final grading as *grading*, and the score when it lands;
  below, the runner calls as they happen, the end of the agent's console and of the harness
  log. It refreshes itself every few seconds while the run goes on. Every page of the served
  leaderboard links to `/live/`.

It is for the operator's own machine: it listens on 127.0.0.1 by default and everything it
shows is escaped (agent and bundle text is hostile input, even here).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import html
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import unquote, urlparse

from toolkit.agents.relay.accounting import LOG_FILE as PROVIDER_LOG
from toolkit.run import journal, recovery
from toolkit.run.artifacts import AGENT_LOG, AUDIT_FILE, TRANSCRIPT_FILE
from toolkit.run.live import read_live
from toolkit.site_policy import FILE_POLICY, policy_of
from toolkit.view.questions import questions_section
from toolkit.view.timeline import read_jsonl, timeline_svg

REFRESH_S = 3
# Added to every page of the served leaderboard: the way from the board to the runs going on.
LIVE_LINK = (
    b'<a class="ari-live-link" href="/live/" style="position:fixed;right:1em;bottom:1em;'
    b"z-index:10;padding:.4em .8em;background:#3f51b5;color:#fff;border-radius:4px;"
    b'text-decoration:none">runs on this host (live)</a>'
)
WATCH_S = 2.0
LOG_TAIL_BYTES = 16 * 1024


def checkout_config() -> Path | None:
    """The mkdocs.yml of the checkout this toolkit runs from (the site's sources live there)."""
    config = Path(__file__).resolve().parents[2] / "mkdocs.yml"
    return config if config.is_file() else None


class SiteBuilder:
    """Builds the site of `results` into `out` now and whenever the results change."""

    def __init__(self, results: Path, out: Path, config: Path | None) -> None:
        self.results, self.out, self.config = results, out, config
        self.error: str | None = None
        self.builds = 0
        self._seen: frozenset[tuple[str, int, int, int]] | None = None
        self._stop = threading.Event()

    def _stamp(self) -> frozenset[tuple[str, int, int, int]]:
        """Name, time, size and inode of every result file: a result written atomically gets a
        new inode even where its time was set back (`toolkit.run.outcome._backdate`)."""
        files = [*self.results.glob("*.json"), *self.results.glob("*/*.json")]
        seen = set()
        for f in files:
            with contextlib.suppress(OSError):
                st = f.stat()
                seen.add((str(f), st.st_mtime_ns, st.st_size, st.st_ino))
        return frozenset(seen)

    def build(self) -> None:
        if self.config is None:
            self.error = "the site's sources are not here (the toolkit is not run from a checkout)"
            return
        fresh = self.out.with_name(self.out.name + ".next")
        shutil.rmtree(fresh, ignore_errors=True)
        # A bad result file costs its own row only: the site lists it as refused.
        env = {
            **os.environ,
            "ARI_RESULTS_DIR": str(self.results.resolve()),
            "ARI_SKIP_BAD_RESULTS": "1",
        }
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "mkdocs",
                "build",
                "-q",
                "-f",
                str(self.config),
                "-d",
                str(fresh),
            ],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        if done.returncode != 0:
            self.error = (done.stderr.strip().splitlines() or ["mkdocs build failed"])[-1]
            shutil.rmtree(fresh, ignore_errors=True)
            return
        old = self.out.with_name(self.out.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        if self.out.exists():
            self.out.rename(old)
        fresh.rename(self.out)
        shutil.rmtree(old, ignore_errors=True)
        self.error = None
        self.builds += 1

    def watch(self) -> None:
        while not self._stop.wait(WATCH_S):
            stamp = self._stamp()
            if stamp != self._seen:
                self._seen = stamp
                self.build()

    def start(self) -> None:
        self._seen = self._stamp()
        self.build()
        threading.Thread(target=self.watch, name="site-watch", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()


# -- the live pages -----------------------------------------------------------------------------


def _tail(path: Path, size: int = LOG_TAIL_BYTES) -> str:
    try:
        with path.open("rb") as f:
            f.seek(max(0, path.stat().st_size - size))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _state(entry: journal.Entry) -> tuple[str, float]:
    """(state, seconds on the clock) of a run: running, grading (its final grading is under
    way), interrupted, or its result's status."""
    harness = Path(entry.harness)
    elapsed = (datetime.now(UTC) - entry.started_at).total_seconds()
    if (harness / recovery.MARKER).is_file():
        try:
            m = recovery.load_marker(harness)
            if recovery.is_alive(m.pid, m.pid_start):
                grading = read_live(harness).get("grading") is True
                return ("grading" if grading else "running"), min(elapsed, entry.budget_s)
        except (OSError, ValueError):
            pass
        return "interrupted", min(elapsed, entry.budget_s)
    result = _result(entry)
    if result is None:
        return "missing", 0.0
    timings = result.get("timings")
    try:
        used = float(timings["used_s"]) if isinstance(timings, dict) else 0.0
    except (KeyError, TypeError, ValueError):
        used = 0.0
    return str(result.get("status", "?")), used


def _result(entry: journal.Entry) -> dict[str, object] | None:
    with contextlib.suppress(OSError, ValueError):
        data = json.loads(entry.result_path.read_text(encoding="utf-8"))
        if isinstance(data, dict):
            return data
    return None


def _outcome(result: dict[str, object]) -> str:
    """The score line of a finished run (status, score, bits per byte, reason), as HTML."""
    status = str(result.get("status", "?"))
    score = result.get("score")
    percent = score.get("percent") if isinstance(score, dict) else None
    shown = "no score (invalid)" if status == "invalid" or percent is None else f"{percent}%"
    if isinstance(score, dict) and status != "invalid":
        shown += f" ({score.get('passed')}/{score.get('total')})"
    bpb = result.get("bits_per_byte")
    bpb_text = f" · bits per byte {bpb}" if isinstance(bpb, int | float) else ""
    reason = result.get("status_reason")
    why = f"<br>{html.escape(str(reason)[:500])}" if reason else ""
    return (
        f'<p class="outcome">score <b class="{html.escape(status)}">{html.escape(shown)}</b>'
        f"{html.escape(bpb_text)}{why}</p>"
    )


def spend(artifacts: Path) -> str:
    """Model calls and tokens so far, from the relay's log (`provider.jsonl`); "" without one."""
    entries = [e for e in read_jsonl(artifacts / PROVIDER_LOG) if e.get("kind") != "probe"]
    if not entries:
        return ""
    tokens = 0
    refused = 0
    for e in entries:
        usage = e.get("usage")
        if isinstance(usage, dict):
            tokens += sum(v for v in usage.values() if isinstance(v, int))
        if "budget" in str(e.get("error") or "") or "budget" in str(e.get("outcome") or ""):
            refused += 1
    spent = f" · {refused} refused: the budget is spent" if refused else ""
    return f"model calls {len(entries)} · tokens {tokens:,}{spent}"


PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8">{refresh}
<title>{title}</title><style>
body {{ font: 14px system-ui, sans-serif; margin: 1.5em; max-width: 1100px }}
table {{ border-collapse: collapse }} td, th {{ padding: 2px 10px; text-align: left }}
pre {{ background: #f6f6f6; padding: 8px; max-height: 30em; overflow-y: auto;
  white-space: pre-wrap; overflow-wrap: anywhere }}
svg.timeline {{ max-width: 100% }}
.running, .grading {{ color: #06c }} .valid {{ color: #080 }} .failed {{ color: #a60 }}
.invalid, .interrupted {{ color: #c00 }}
</style></head><body><p><a href="/">leaderboard</a> · <a href="/live/">runs on this host</a></p>
{body}<script>{script}</script></body></html>"""

# The page reloads itself every REFRESH_S seconds while a run goes on: without this, each
# reload put every console box back at its top and the page at its start. A box the reader
# left at its end follows the new lines; one scrolled up stays where it was (per tab).
KEEP_SCROLL = """(function () {
  var key = "ari-scroll:" + location.pathname, saved = {};
  try { saved = JSON.parse(sessionStorage.getItem(key) || "{}"); } catch (e) {}
  var boxes = document.querySelectorAll("pre");
  for (var i = 0; i < boxes.length; i++) {
    var was = saved["pre" + i];
    boxes[i].scrollTop = !was || was.end ? boxes[i].scrollHeight : was.top;
  }
  if (typeof saved.page === "number") window.scrollTo(0, saved.page);
  window.addEventListener("pagehide", function () {
    var state = {page: window.scrollY};
    for (var i = 0; i < boxes.length; i++) {
      var b = boxes[i], end = b.scrollTop + b.clientHeight >= b.scrollHeight - 4;
      state["pre" + i] = {top: b.scrollTop, end: end};
    }
    try { sessionStorage.setItem(key, JSON.stringify(state)); } catch (e) {}
  });
})();"""


# The live pages show the agent's text (escaped): whatever it holds, the browser runs no script
# but the scroll keeper above, named by its hash.
LIVE_POLICY = (
    "script-src 'sha256-"
    + base64.b64encode(hashlib.sha256(KEEP_SCROLL.encode()).digest()).decode()
    + "'"
)


def _page(title: str, body: str, refresh: bool) -> bytes:
    meta = f'<meta http-equiv="refresh" content="{REFRESH_S}">' if refresh else ""
    return PAGE.format(
        refresh=meta, title=html.escape(title), body=body, script=KEEP_SCROLL
    ).encode()


def live_index() -> bytes:
    rows, running = [], False
    for e in journal.entries()[:100]:
        state, clock = _state(e)
        running = running or state == "running"
        label = f"{e.model} ({e.effort})" if e.effort else e.model
        rows.append(
            f'<tr><td><a href="/live/{html.escape(e.run_id)}">{html.escape(e.run_id)}</a></td>'
            f"<td>{html.escape(e.track)}</td><td>{html.escape(label)}</td><td>{e.seed}</td>"
            f'<td class="{html.escape(state)}">{html.escape(state)}</td>'
            f"<td>{clock:.0f}/{e.budget_s:.0f} s</td><td>{_score(e, state)}</td></tr>"
        )
    table = (
        "<table><tr><th>run</th><th>track</th><th>model</th><th>seed</th><th>state</th>"
        f"<th>clock</th><th>score</th></tr>{''.join(rows)}</table>"
        if rows
        else "<p>No runs on this host yet.</p>"
    )
    return _page("runs on this host", f"<h1>Runs on this host</h1>{table}", running)


def _score(entry: journal.Entry, state: str) -> str:
    """A finished run's score, as its result says it ("—" before there is one)."""
    if state in ("running", "grading", "interrupted", "missing"):
        return "—"
    result = _result(entry)
    score = result.get("score") if result else None
    percent = score.get("percent") if isinstance(score, dict) else None
    return f"{percent:.1f}%" if isinstance(percent, int | float) else "—"


def live_run(run_id: str) -> bytes | None:
    try:
        e = journal.find(run_id)
    except LookupError:
        return None
    if e.run_id != run_id:
        return None
    state, clock = _state(e)
    reserved = _reserved(e)
    left = max(0.0, e.budget_s - clock)
    label = f"{e.model} ({e.effort})" if e.effort else e.model
    artifacts = Path(e.artifacts)
    live = read_live(Path(e.harness)) if state in ("running", "grading") else {}
    in_flight = _in_flight(live) if state == "running" else []
    result = None if state in ("running", "grading", "interrupted") else _result(e)
    if result is not None:
        clock_text = f"used <b>{clock:.0f} s</b> of {e.budget_s:.0f} s"
    elif state == "grading":
        # The session's own length (the harness's clock), not the time since it started.
        ended = live.get("session_s")
        clock = float(ended) if isinstance(ended, int | float) else clock
        clock_text = f"session over at <b>{clock:.1f} s</b>: grading the promoted bundle"
    else:
        clock_text = f"clock <b>{clock:.0f} s</b> of {e.budget_s:.0f} s · <b>{left:.0f} s left</b>"
    body = (
        f"<h1>{html.escape(e.run_id)}</h1>"
        f"<p>{html.escape(e.track)} · {html.escape(label)} · seed {e.seed} · "
        f"{html.escape(e.agent)}</p>"
        f'<p>state <b class="{html.escape(state)}">{html.escape(state)}</b> · {clock_text}</p>'
        f"{_outcome(result) if result is not None else ''}"
        f"<p>{html.escape(spend(artifacts))}</p>"
        f"{timeline_svg(e, clock, reserved, in_flight, live=state in ('running', 'grading'))}"
        "<p>Bars: runner calls (dashed: still running). Dots: submissions (hover for the "
        "public score). Triangle: promotion. Red: now; pink: the reserved window "
        f"({reserved:.0f} s, submit and promote only).</p>"
        f"<h2>Runner calls</h2>{_calls_table(artifacts, in_flight, clock)}"
        f"{questions_section(artifacts)}"
        f"{_console(artifacts, live)}"
        f"<h2>Harness log (end)</h2><pre>{html.escape(_tail(artifacts / AGENT_LOG))}</pre>"
    )
    return _page(e.run_id, body, state in ("running", "grading"))


def _in_flight(live: dict[str, object]) -> list[tuple[float, str]]:
    """(start second, the call's words) of each call in flight, from live.json."""
    out: list[tuple[float, str]] = []
    calls = live.get("calls")
    for call in calls if isinstance(calls, list) else []:
        if not isinstance(call, dict) or not isinstance(call.get("start_s"), int | float):
            continue
        argv = call.get("argv")
        words = [a for a in argv if isinstance(a, str)] if isinstance(argv, list) else []
        out.append((float(call["start_s"]), " ".join(words)[:200]))
    return out


CALLS_SHOWN = 15


def _calls_table(artifacts: Path, in_flight: list[tuple[float, str]], now_s: float) -> str:
    """The latest runner calls, newest first: those in flight, then the audited ones."""
    rows = [
        f"<tr><td>{start:.0f} s</td><td>{now_s - start:.0f} s so far</td>"
        f'<td class="running">running</td><td><code>{html.escape(name)}</code></td></tr>'
        for start, name in reversed(in_flight)
    ]
    for call in reversed(read_jsonl(artifacts / AUDIT_FILE)[-CALLS_SHOWN:]):
        start, end = call.get("start_s"), call.get("end_s")
        if not isinstance(start, int | float) or not isinstance(end, int | float):
            continue
        argv = call.get("argv")
        words = [a for a in argv if isinstance(a, str)] if isinstance(argv, list) else []
        rows.append(
            f"<tr><td>{start:.0f} s</td><td>{end - start:.0f} s</td>"
            f"<td>exit {html.escape(str(call.get('exit_code')))}</td>"
            f"<td><code>{html.escape(' '.join(words)[:200])}</code></td></tr>"
        )
    if not rows:
        return "<p>No runner call yet.</p>"
    return (
        '<table class="calls"><tr><th>start</th><th>took</th><th>outcome</th><th>call</th></tr>'
        f"{''.join(rows[:CALLS_SHOWN])}</table>"
    )


def _console(artifacts: Path, live: dict[str, object]) -> str:
    """The end of each file that gets the agent's console (named in live.json while the run
    goes on; the transcript afterwards), escaped: it is the agent's text."""
    named = live.get("console")
    names = [n for n in named if isinstance(n, str)] if isinstance(named, list) else []
    names = [n for n in names if "/" not in n and n not in ("", ".", "..")] or [TRANSCRIPT_FILE]
    parts = []
    for name in names:
        text = _tail(artifacts / name, LOG_TAIL_BYTES // 2)
        if text:
            parts.append(f"<h2>Agent console: {html.escape(name)} (end)</h2>")
            parts.append(f'<pre class="console">{html.escape(text)}</pre>')
    return "".join(parts)


def _reserved(e: journal.Entry) -> float:
    """The run's reserved window, from its crash marker or result: the effective config's
    `budget.reserved_s` (0 when unknown)."""
    for path in (Path(e.harness) / recovery.MARKER, e.result_path):
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError, AttributeError):
            data = json.loads(path.read_text(encoding="utf-8"))
            data = data.get("skeleton", data)
            return float(data["config"]["budget"]["reserved_s"])
    return 0.0


class Handler(http.server.SimpleHTTPRequestHandler):
    """Static files of the built site, plus the live pages."""

    site_dir: Path
    _policy_sent = False  # this response's Content-Security-Policy header is out

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, directory=str(self.site_dir), **kwargs)  # type: ignore[arg-type]

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self._policy_sent = False
        path = unquote(urlparse(self.path).path)
        if path in ("/live", "/live/"):
            return self._send(live_index(), LIVE_POLICY)
        if path.startswith("/live/"):
            page = live_run(path.removeprefix("/live/").strip("/"))
            if page is None:
                return self.send_error(404, "no such run on this host")
            return self._send(page, LIVE_POLICY)
        if not (self.site_dir / "index.html").is_file() and path in ("/", "/index.html"):
            return self._send(_page("ARI Bench", self.server_note(), True), LIVE_POLICY)
        page = self._site_page(path)
        if page is not None:  # the policy the page carries, as a header too
            return self._send(page, policy_of(page) or FILE_POLICY)
        return super().do_GET()  # any other file: `end_headers` adds the strict policy

    def end_headers(self) -> None:
        """Every response says what may run: a file that is not one of our pages (a raw
        artifact named .html or .svg is someone else's bytes) runs nothing, and is never
        sniffed into another type."""
        if not self._policy_sent:
            self.send_header("Content-Security-Policy", FILE_POLICY)
        self.send_header("X-Content-Type-Options", "nosniff")
        super().end_headers()

    def _site_page(self, path: str) -> bytes | None:
        """A page of the built site with a link to the live view added (the published site
        has none: /live/ exists only here); None for anything else (served as a file)."""
        name = path.lstrip("/") or "index.html"
        if name.endswith("/"):
            name += "index.html"
        if not name.endswith(".html"):
            return None
        file = (self.site_dir / name).resolve()
        if not file.is_relative_to(self.site_dir.resolve()) or not file.is_file():
            return None
        text = file.read_bytes()
        return text.replace(b"</body>", LIVE_LINK + b"</body>", 1)

    def server_note(self) -> str:
        error = getattr(self.server, "site_error", lambda: None)()
        why = html.escape(error) if error else "the site is being built"
        return f"<h1>ARI Bench</h1><p>No leaderboard yet: {why}.</p>"

    def _send(self, body: bytes, policy: str | None = None) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        if policy is not None:
            self.send_header("Content-Security-Policy", policy)
            self._policy_sent = True
        self.end_headers()
        self.wfile.write(body)


def serve(results: Path, host: str, port: int, work: Path, announce: Callable[[str], None]) -> None:
    """Build, watch and serve until interrupted; `announce` gets the address once listening."""
    work.mkdir(parents=True, exist_ok=True)
    site = work / "site"
    builder = SiteBuilder(results, site, checkout_config())
    site.mkdir(exist_ok=True)
    handler = type("ViewHandler", (Handler,), {"site_dir": site})
    httpd = http.server.ThreadingHTTPServer((host, port), handler)
    httpd.site_error = lambda: builder.error  # type: ignore[attr-defined]
    threading.Thread(target=builder.start, name="site-build", daemon=True).start()
    announce(f"http://{host}:{httpd.server_address[1]}/")
    try:
        httpd.serve_forever(poll_interval=0.2)
    finally:
        builder.stop()
        httpd.server_close()
