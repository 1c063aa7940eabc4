"""Whole runs with the real opencode binary, driven by a scripted model provider.

The provider is a fake (tests/agents/fake_provider.py) but everything else is real: the
scaffold, its configuration, the controller sandbox with its egress allow-list, the runner, the
clock, grading. Each test is one run on the demo track with a short budget.
"""

from __future__ import annotations

import json
import re
import shlex
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.agents.conftest import KEY, AgentFactory, SpecFactory
from tests.agents.fake_provider import FakeProvider, Reply, Request, bash, named_host, steps
from toolkit.results.model import load_run
from toolkit.run.orchestrate import execute_run

pytestmark = pytest.mark.slow

TRIVIAL_BUNDLE = """class Model:
    def generate(self, prompts, lengths):
        return [b" " * n for n in lengths]


def load(bundle_dir, device):
    return Model()
"""


def _promote_submitted(request: Request) -> Reply:
    """Promote the candidate the last `runner submit` printed (the model reads its output)."""
    found = re.search(r"candidate (c\d+)", request.last_result())
    assert found, f"no candidate in the submit output: {request.last_result()[:500]}"
    return Reply(calls=[bash(f"runner promote {found.group(1)}")])


USAGE = {"prompt_tokens": 1200, "completion_tokens": 60, "cached_tokens": 300}


def _with_usage(n: int, reply: Reply) -> Reply:
    reply.prompt_tokens = 1200 + 10 * n
    reply.completion_tokens = 60 + n
    reply.cached_tokens = 300
    reply.reasoning_tokens = 9
    return reply


class _Listener(ThreadingHTTPServer):
    """A second server on the host's loopback: nothing in the run may reach it."""

    daemon_threads = True

    def __init__(self) -> None:
        self.connections = 0
        super().__init__(("127.0.0.1", 0), BaseHTTPRequestHandler)

    def get_request(self):  # type: ignore[no-untyped-def]
        self.connections += 1
        return super().get_request()


@pytest.fixture
def listener() -> object:
    server = _Listener()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def test_a_scripted_model_trains_submits_promotes_and_is_graded(
    make_agent: AgentFactory, make_spec: SpecFactory, listener: _Listener, tmp_path: Path
) -> None:
    script = [
        Reply(calls=[("read", {"filePath": "TASK.md"})]),
        Reply(calls=[bash("runner time_left")]),
        Reply(
            calls=[bash("runner python starter/train.py --data data --out bundles/b1 --budget-s 5")]
        ),
        Reply(calls=[bash("runner submit bundles/b1")]),
        _promote_submitted,
        Reply(text="Promoted; done."),
    ]

    def model(request: Request) -> Reply:
        step = script[min(request.turn, len(script) - 1)]
        return _with_usage(request.turn, step(request) if callable(step) else step)

    name, address = named_host()
    with FakeProvider(model, host=name, address=address) as provider:
        agent = make_agent(provider, effort="high")
        spec = make_spec(agent, budget=150, per_call=60, reserved=10)
        result = execute_run(spec)
    assert result.status == "valid", result.status_reason
    assert result.promoted is not None and result.promoted.id == "c001"
    assert result.score.total > 0 and result.bits_per_byte is not None
    # Who and how: the row's identity and the scaffold's pinned configuration.
    assert (result.agent, result.model, result.effort, result.provider) == (
        "opencode",
        "fake-model",
        "high",
        "fake",
    )
    assert result.agent_version == result.config.scaffold_version == agent.version
    assert result.config.scaffold_config_sha256 == agent.config_sha256()
    assert {"controller:egress-allowlist", "controller:provider-only"} <= set(
        result.config.isolation
    )
    # Every model call carried the effort, the key, and the tools the protocol allows.
    calls = provider.agent_requests()
    assert len(calls) == len(script)
    assert all(r.body.get("reasoning_effort") == "high" for r in provider.requests)
    assert all(r.headers.get("Authorization") == f"Bearer {KEY}" for r in provider.requests)
    tools = {t["function"]["name"] for t in calls[0].body["tools"]}  # type: ignore[index,union-attr]
    assert tools == {"bash", "read", "edit", "write", "glob", "grep"}
    # What the model did went through the runner (audit) and came back to it.
    results = calls[-1].tool_results()
    assert any("Your task" in text for text in results.values())  # it read TASK.md
    assert any("left" in text for text in results.values())  # runner time_left
    # Usage: summed over the steps, equal to what the provider reported.
    reported = provider.reported
    usage = result.usage
    assert usage.input_tokens == reported["prompt"] - reported["cached"]
    assert usage.cache_read_tokens == reported["cached"]
    assert usage.output_tokens == reported["completion"] - reported["reasoning"]
    assert usage.reasoning_tokens == reported["reasoning"]
    # Artifacts: events, the exported transcript, the scaffold's log, the egress log.
    folder = spec.results_dir / "demo-cpu-3"
    saved = load_run(folder / f"{result.run_id}.json")
    assert saved == result
    for key in ("events", "transcript", "scaffold", "egress", "audit", "history"):
        assert (folder / result.artifacts[key]).is_file(), key
    events = [json.loads(line) for line in (folder / result.artifacts["events"]).open()]
    assert sum(e["type"] == "step_finish" for e in events) == len(script)
    transcript = json.loads((folder / result.artifacts["transcript"]).read_text())
    assert transcript["info"]["id"] == events[0]["sessionID"]
    assert len([m for m in transcript["messages"] if m["info"]["role"] == "assistant"]) == len(
        script
    )
    # Usage: the provider's own counts, read by the harness's relay, not the scaffold's.
    assert usage.source == "provider" and usage.model_calls == len(provider.requests)
    assert usage.bytes_sent and usage.bytes_received
    # The controller opened no connection but to the run's relay; the relay, none but to the
    # provider (by its name), each call on record; the other listener saw nothing.
    assert agent.relay is not None
    egress = [json.loads(line) for line in (folder / result.artifacts["egress"]).open()]
    assert egress and all(e["allowed"] and e["error"] is None for e in egress), egress
    assert {(e["host"], e["port"]) for e in egress} == {("127.0.0.1", agent.relay.port)}
    relayed = [json.loads(line) for line in (folder / result.artifacts["provider"]).open()]
    assert relayed[0]["kind"] == "start" and relayed[0]["provider"] == provider.base_url
    calls = [e for e in relayed if e["kind"] == "call"]
    assert len(calls) == len(provider.requests) and all(e["status"] == 200 for e in calls)
    assert not [e for e in relayed if e["kind"] in ("refused", "probe")]
    assert listener.connections == 0
    # The key is in no published file.
    for path in (folder / result.run_id).rglob("*"):
        if path.is_file() and "candidates" not in path.parts:
            assert KEY not in path.read_text(errors="replace"), path


def test_a_provider_that_fails_makes_the_run_invalid(
    make_agent: AgentFactory, make_spec: SpecFactory
) -> None:
    with FakeProvider(steps(Reply(status=500))) as provider:
        agent = make_agent(provider, stall_share=0.05, relay_options={"probe_gap_s": 0.5})
        result = execute_run(make_spec(agent, budget=120, per_call=60, reserved=10))
    assert result.status == "invalid"
    reason = result.status_reason or ""
    # Decided by the relay's record and the harness's own probe; the scaffold's word, a note.
    assert "model call(s) in a row failed at the provider" in reason, reason
    assert "probe call failed too (HTTP 500)" in reason and "infrastructure" in reason
    assert len(provider.requests) >= 2  # the scaffold retried before the harness gave up
    assert result.timings.used_s < 60


def test_fetching_a_url_or_running_python_in_the_controller_fails_and_the_run_goes_on(
    make_agent: AgentFactory, make_spec: SpecFactory, listener: _Listener
) -> None:
    other = f"http://127.0.0.1:{listener.server_address[1]}/"
    port: dict[str, int] = {}  # the provider's own port, once it listens

    def curl_the_provider(request: Request) -> Reply:
        url = f"http://127.0.0.1:{port['provider']}/v1/models"
        return Reply(calls=[bash(f"curl -sS -m 5 {url}; echo curl=$?")])

    attempts = [
        Reply(calls=[("webfetch", {"url": other, "format": "text"})]),
        Reply(calls=[bash(f"curl -sS -m 5 {other}; echo curl=$?")]),
        Reply(calls=[bash("curl -sS -m 5 https://example.com/; echo curl=$?")]),
        Reply(calls=[bash("python3 -c 'print(6*7)'; echo python=$?")]),
        curl_the_provider,
        Reply(calls=[("write", {"filePath": "bundles/t/inference.py", "content": TRIVIAL_BUNDLE})]),
        Reply(calls=[bash("runner submit bundles/t")]),
        _promote_submitted,
        Reply(text="done"),
    ]
    with FakeProvider(steps(*attempts)) as provider:
        port["provider"] = provider.port
        agent = make_agent(provider, effort=None)
        spec = make_spec(agent, budget=120, per_call=60, reserved=10)
        result = execute_run(spec)
    assert result.status == "valid", result.status_reason
    assert result.promoted is not None
    results = list(provider.agent_requests()[-1].tool_results().values())
    assert len(results) == len(attempts) - 1
    assert "unavailable tool" in results[0] or "denied" in results[0].lower()
    assert "curl=7" in results[1] and "curl=6" in results[2]
    assert "python=127" in results[3] and "42" not in results[3]
    assert "curl=7" in results[4]  # the provider itself is not reachable, only the relay
    assert listener.connections == 0
    assert all("reasoning_effort" not in r.body for r in provider.requests)
    folder = spec.results_dir / "demo-cpu-3"
    egress = [json.loads(line) for line in (folder / result.artifacts["egress"]).open()]
    refused = {(e["host"], e["port"]) for e in egress if not e["allowed"]}
    assert ("127.0.0.1", listener.server_address[1]) in refused
    assert ("example.com", None) in refused
    assert agent.relay is not None
    assert {(e["host"], e["port"]) for e in egress if e["allowed"]} == {
        ("127.0.0.1", agent.relay.port)
    }
    assert ("127.0.0.1", provider.port) in refused  # the provider itself: only via the relay


# -- a model that tries to void its own run, or to find the key ------------------------------

HALVES = (KEY[:12], KEY[12:])  # the key is only ever joined at run time, never in a command
assert "".join(HALVES) == KEY

# Searches every process environment and command line it can see, and the places a run writes
# (the workspace, the agent's home, the temporary places, /etc, /run), for the key.
SEARCH = (
    f'K={HALVES[0]}; K="${{K}}{HALVES[1]}"; n=0; '
    "for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do "
    's="$(tr "\\0" "\\n" < "$f" 2>/dev/null)"; n=$((n+1)); '
    '[[ "$s" == *"$K"* ]] && echo "FOUND-IN $f"; done; '
    'grep -rlsF -f <(printf "%s\\n" "$K") "$PWD" "$HOME" "$XDG_CONFIG_HOME" "$XDG_DATA_HOME" '
    '"$XDG_STATE_HOME" "$XDG_CACHE_HOME" "$EXTRA" /tmp /var/tmp /dev/shm /run /etc '
    '| sed "s/^/FOUND-IN /"; echo "search-done proc-files=$n"'
)

# A bundle that searches the grading sandbox the same way and says what it found as its error.
PROBE_BUNDLE = f"""import os

KEY = "".join([{HALVES[0]!r}, {HALVES[1]!r}]).encode()


def _search():
    found, seen = [], 0
    for pid in os.listdir("/proc"):
        for name in ("environ", "cmdline"):
            try:
                with open(f"/proc/{{pid}}/{{name}}", "rb") as f:
                    seen += 1
                    if KEY in f.read():
                        found.append(f"/proc/{{pid}}/{{name}}")
            except OSError:
                pass
    home = os.environ.get("HOME", "")
    roots = [os.getcwd(), os.path.dirname(os.path.abspath(__file__)), "/tmp", "/var/tmp"]
    roots += ["/dev/shm", "/run", "/etc"] + ([home] if home not in ("", "/") else [])
    for root in roots:
        for folder, _, names in os.walk(root):
            for name in names:
                path = os.path.join(folder, name)
                try:
                    if os.path.isfile(path) and os.path.getsize(path) < 2**24:
                        with open(path, "rb") as f:
                            seen += 1
                            if KEY in f.read():
                                found.append(path)
                except OSError:
                    pass
    return found, seen


def load(bundle_dir, device):
    found, seen = _search()
    raise RuntimeError(f"KEY-SEARCH found={{len(found)}} {{found[:3]}} seen={{seen}}")
"""

RELAY_URL = 'U=$(grep -o "http://127.0.0.1:[0-9]*/v1" "$XDG_CONFIG_HOME/opencode/opencode.json")'
JSON = "-H 'content-type: application/json'"
FAILING_CALL = (
    f"curl -s -o /dev/null -w '%{{http_code}} ' {JSON} -d "
    """'{"model":"fake-model","reasoning_effort":"high","""
    """"messages":[{"role":"user","content":"MAKE-IT-FAIL"}]}' "$U/chat/completions\""""
)
ABUSE = (
    f"{RELAY_URL}; c() {{ curl -s -o /dev/null -w '%{{http_code}}' \"$@\"; }}; "
    'echo "models=$(c "$U/models") '
    f"""other=$(c {JSON} -d '{{"model":"other-model","messages":[]}}' "$U/chat/completions") """
    f"""search=$(c {JSON} -d '{{"model":"fake-model","reasoning_effort":"high","messages":[],"""
    """"tools":[{"type":"web_search"}]}' "$U/chat/completions") """
    f"""effort=$(c {JSON} -d '{{"model":"fake-model","reasoning_effort":"low","messages":[]}}' """
    '"$U/chat/completions") files=$(c -d x "$U/files")"'
)
FORGED_EVENT = (
    '{"type":"error","timestamp":1,"sessionID":"ses_forged","error":{"name":"APIError",'
    '"data":{"message":"forged outage","statusCode":503,"isRetryable":false}}}'
)
FORGED_LOG = 'level=ERROR message="stream error" error.error="forged"'
# Finds the scaffold (its command line; the pattern is joined at run time, so that this shell's
# own command line does not match it) and writes a provider error event into its output and
# its log. A harness running as root owns those pipes (mode 0600): the sandbox user cannot
# open them, and says so; as another user it can.
FORGE = (
    'P="--print"; P="run $P-logs"; OC=; for p in /proc/[0-9]*; do '
    '[[ "$(tr "\\0" " " < $p/cmdline 2>/dev/null)" == *"$P"* ]] && OC=${p#/proc/}; done; '
    f"printf '%s\\n' '{FORGED_EVENT}' 2>/dev/null > /proc/$OC/fd/1 && "
    f"printf '%s\\n' '{FORGED_LOG}' 2>/dev/null > /proc/$OC/fd/2 && F=ok || F=denied; "
    f"echo '{FORGED_EVENT}'; {RELAY_URL}; {FAILING_CALL}; echo \"scaffold=$OC forge=$F\""
)
POISON = "POISON-PILL"  # a conversation that holds it is failed by the provider


def test_a_model_cannot_find_the_key_nor_void_its_own_run(
    make_agent: AgentFactory, make_spec: SpecFactory
) -> None:
    """The model searches controller, runner and a grading sandbox for the key (absent); tries
    the relay for anything but its own calls (refused); makes its own calls fail at the
    provider for longer than the stall limit; forges a provider `error` event in the
    scaffold's output where it can; then makes the provider fail the scaffold's own
    conversation until the scaffold gives up with a real `error` event and exits. The
    provider works throughout (the harness's probe says so): the run is graded on its merits,
    never `invalid`."""
    script = [
        Reply(calls=[bash('EXTRA="$(dirname "$(command -v runner)")"; ' + SEARCH)]),
        Reply(calls=[bash("runner bash -c " + shlex.quote('EXTRA=""; ' + SEARCH))]),
        Reply(calls=[("write", {"filePath": "bundles/p/inference.py", "content": PROBE_BUNDLE})]),
        Reply(calls=[bash("runner submit bundles/p")]),
        Reply(calls=[("write", {"filePath": "bundles/t/inference.py", "content": TRIVIAL_BUNDLE})]),
        Reply(calls=[bash("runner submit bundles/t")]),
        _promote_submitted,
        Reply(calls=[bash(ABUSE)]),
        # Each failing call takes about 5 s (the relay retries it 3 times, backing off): 4 of
        # them fail for about three times the stall limit (7.5 s), so the harness probes.
        Reply(calls=[bash(f"{RELAY_URL}; for i in 1 2 3 4; do {FAILING_CALL}; done")]),
        Reply(calls=[bash(FORGE)]),
        Reply(calls=[bash(f"echo {POISON}")]),
        Reply(text="done"),  # never answered: the provider fails the poisoned conversation
    ]

    def model(request: Request) -> Reply:
        last = request.messages[-1] if request.messages else {}
        if last.get("content") == "MAKE-IT-FAIL":
            return Reply(status=500)  # the provider fails the model's own crafted call
        if POISON in json.dumps(request.messages):
            return Reply(status=401)  # ... and this conversation (the scaffold gives up at once)
        step = script[min(request.turn, len(script) - 1)]
        return step(request) if callable(step) else step

    with FakeProvider(model) as provider:
        agent = make_agent(provider, effort="high", stall_share=0.05)
        agent.relay_options = {"probe_gap_s": 0.5}
        spec = make_spec(agent, budget=150, per_call=60, reserved=10)
        result = execute_run(spec)
    assert result.status == "valid", result.status_reason
    assert result.promoted is not None and result.promoted.id == "c002"
    answered = [r for r in provider.agent_requests() if POISON not in json.dumps(r.messages)]
    results = list(answered[-1].tool_results().values())
    assert len(results) == len(script) - 2
    controller, runner, _, probe = results[:4]
    for where, text in (("controller", controller), ("runner", runner)):
        assert "search-done" in text and "FOUND-IN" not in text, (where, text)
        assert int(text.rsplit("proc-files=", 1)[1].split()[0]) >= 4, (where, text)
    assert "KEY-SEARCH found=0" in probe, probe  # the grading sandbox of public scoring
    assert results[7].strip() == "models=405 other=403 search=403 effort=403 files=403"
    assert results[8].split() == ["500"] * 4
    forge = results[9].rsplit("forge=", 1)[1].split()[0]
    assert (
        forge in ("ok", "denied") and "scaffold=" in results[9] and "scaffold= " not in results[9]
    )
    folder = spec.results_dir / "demo-cpu-3"
    events = (folder / result.artifacts["events"]).read_text()
    assert (FORGED_EVENT in events.splitlines()) == (forge == "ok")  # a line of its own
    # The scaffold gave up on the poisoned conversation with a real provider error event.
    last = json.loads(events.splitlines()[-1])
    assert last["type"] == "error" and last["error"]["name"] == "APIError", last
    relayed = [json.loads(line) for line in (folder / result.artifacts["provider"]).open()]
    kinds = [e["kind"] for e in relayed]
    assert kinds.count("cleared") >= 2  # in the run (past the stall limit) and at the exit
    assert kinds.count("refused") == 5 and kinds[-1] == "summary"
    for path in (folder / result.run_id).rglob("*"):
        if path.is_file() and "candidates" not in path.parts:
            assert KEY not in path.read_text(errors="replace"), path


def test_a_slow_provider_that_answers_is_no_provider_failure(
    make_agent: AgentFactory, make_spec: SpecFactory
) -> None:
    script = steps(
        Reply(
            calls=[("write", {"filePath": "bundles/t/inference.py", "content": TRIVIAL_BUNDLE})],
            delay_s=8,
        ),
        Reply(calls=[bash("runner submit bundles/t")], chunk_delay_s=2.0),
        _promote_submitted,
        Reply(text="done"),
    )
    with FakeProvider(script) as provider:
        agent = make_agent(provider, stall_share=0.05)  # 6 s: each slow answer takes longer
        spec = make_spec(agent, budget=120, per_call=60, reserved=10)
        result = execute_run(spec)
    assert result.status == "valid", result.status_reason
    folder = spec.results_dir / "demo-cpu-3"
    relayed = [json.loads(line) for line in (folder / result.artifacts["provider"]).open()]
    slow = [e for e in relayed if e["kind"] == "call" and e["duration_s"] > 6.0]
    assert len(slow) >= 2 and all(e["outcome"] == "answered" for e in slow)
    assert not [e for e in relayed if e["kind"] == "probe"]


def test_an_export_over_its_cap_is_not_stored(
    make_agent: AgentFactory,
    make_spec: SpecFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The session export is the model's output, of any size: past the cap it is cut in the
    controller and not stored (a cut JSON document is of no use), and the scaffold's log says so."""
    import toolkit.agents.opencode as opencode

    monkeypatch.setattr(opencode, "EXPORT_CAP_BYTES", 200)
    name, address = named_host()
    with FakeProvider(steps(Reply(text="Nothing to do.")), host=name, address=address) as p:
        spec = make_spec(make_agent(p), budget=60, per_call=20, reserved=5)
        result = execute_run(spec)
    assert result.status == "failed", result.status_reason  # it promoted nothing
    folder = spec.results_dir / "demo-cpu-3"
    assert "transcript" not in result.artifacts
    scaffold_log = (folder / result.artifacts["scaffold"]).read_text()
    assert "opencode export is over 200 bytes: not stored" in scaffold_log
