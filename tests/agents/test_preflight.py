"""The provider pre-flight of `toolkit run` and `toolkit doctor`: one tiny call before the clock.

A bad key or a provider that cannot be reached is found before anything is prepared or
written: one line, exit status 1, no result file, nothing left in $ARI_HOME; the provider sees
one request. A run whose provider fails later still ends `invalid`, and its reason is printed
once.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tests.agents.conftest import KEY, providers_file
from tests.agents.fake_provider import FakeProvider, Reply, Request
from toolkit.agents.opencode import OpencodeAgent
from toolkit.agents.provider_api import PROBE_TEXT
from toolkit.cli import cli
from toolkit.results.signing import local_key

REPO = Path(__file__).resolve().parents[2]


def _is_probe(request: Request) -> bool:
    return any(m.get("content") == PROBE_TEXT for m in request.messages)


def _run(tmp_path: Path, providers: Path, *extra: str) -> Result:
    args = ["run", "--agent", "opencode", "--provider", "fake", "--providers", str(providers)]
    args += ["--model", "fake-model", "--seed", "0", "--track", "demo-cpu-3", "--device", "cpu"]
    args += ["--results", str(tmp_path / "results"), "--quiet", *extra]
    return CliRunner().invoke(cli, args)


def _home_files(home: Path) -> set[Path]:
    return {p for p in home.rglob("*")} if home.exists() else set()


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def keyed(
    opencode_binary: tuple[Path, str], monkeypatch: pytest.MonkeyPatch, ari_home: Path
) -> Path:
    """The fake provider's key in the environment, and this machine's signing key made (so
    that $ARI_HOME can be compared before and after)."""
    monkeypatch.setenv("FAKE_PROVIDER_KEY", KEY)
    local_key()
    return ari_home


def _refused_cleanly(done: Result, tmp_path: Path, home: Path, before: set[Path]) -> str:
    """Exit 1, one line naming the failure, no key, nothing written; the line."""
    assert done.exit_code == 1, done.output
    lines = [line for line in done.output.splitlines() if line.strip()]
    assert len(lines) == 1, done.output
    assert KEY not in done.output and "Traceback" not in done.output
    assert len(lines[0]) < 260  # "Error: " and the bounded line
    assert not (tmp_path / "results").exists()  # no result file, not even the track carried
    assert _home_files(home) == before  # no data prepared, no run folder
    return lines[0]


def test_a_bad_key_stops_toolkit_run_before_anything_starts(keyed: Path, tmp_path: Path) -> None:
    before = _home_files(keyed)
    with FakeProvider(lambda r: Reply(status=401)) as provider:
        started = time.monotonic()
        done = _run(tmp_path, providers_file(tmp_path, provider))
        took = time.monotonic() - started
    line = _refused_cleanly(done, tmp_path, keyed, before)
    assert "pre-flight" in line and "HTTP 401" in line and "scripted failure" in line, line
    assert provider.base_url in line and "fake-model" in line
    # One request, the harness's own probe, with the run's key, model and endpoint.
    assert len(provider.requests) == 1 and _is_probe(provider.requests[0])
    assert provider.requests[0].headers.get("Authorization") == f"Bearer {KEY}"
    assert provider.requests[0].body.get("model") == "fake-model"
    print(f"bad key refused in {took:.2f}s")


def _error_send(message: str):  # type: ignore[no-untyped-def]
    """The fake provider's answer writer, with error answers that say `message`."""
    from tests.agents import fake_provider

    original = fake_provider._Handler._send
    said = json.dumps({"error": {"message": message}}).encode()

    def send(self, status, content_type, data, headers=None):  # type: ignore[no-untyped-def]
        original(self, status, content_type, said if status != 200 else data, headers)

    return send


def test_a_provider_quoting_the_key_does_not_get_it_printed(
    keyed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    quoted = _error_send(f"incorrect API key provided: {KEY}")
    monkeypatch.setattr("tests.agents.fake_provider._Handler._send", quoted)
    before = _home_files(keyed)
    with FakeProvider(lambda r: Reply(status=403)) as provider:
        done = _run(tmp_path, providers_file(tmp_path, provider))
    line = _refused_cleanly(done, tmp_path, keyed, before)
    assert "HTTP 403" in line and "incorrect API key provided: [redacted]" in line, line


def test_an_unreachable_provider_stops_toolkit_run_before_anything_starts(
    keyed: Path, tmp_path: Path
) -> None:
    before = _home_files(keyed)
    port = _unused_port()  # nothing listens there: connection refused
    with FakeProvider(lambda r: Reply()) as provider:
        url = provider.base_url
    path = tmp_path / "providers.toml"
    path.write_text(
        providers_file(tmp_path, provider).read_text().replace(url, f"http://127.0.0.1:{port}/v1")
    )
    done = _run(tmp_path, path)
    line = _refused_cleanly(done, tmp_path, keyed, before)
    assert "pre-flight" in line and "unreachable" in line and "Connection" in line, line


def test_a_working_provider_passes_the_preflight_with_one_call(
    opencode_binary: tuple[Path, str], tmp_path: Path
) -> None:
    with FakeProvider(lambda r: Reply(text="OK")) as provider:
        agent = OpencodeAgent.for_run(
            provider="fake",
            model="fake-model",
            providers_path=providers_file(tmp_path, provider),
            environ={"FAKE_PROVIDER_KEY": KEY},
        )
        assert agent.preflight() is None
    assert len(provider.requests) == 1 and _is_probe(provider.requests[0])


def test_doctor_shows_the_preflight_line(
    keyed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeProvider(lambda r: Reply(status=401)) as provider:
        monkeypatch.setenv("ARI_PROVIDERS", str(providers_file(tmp_path, provider)))
        args = ["doctor", "--provider", "fake", "--model", "fake-model"]
        done = CliRunner().invoke(cli, [*args, "--results", str(REPO / "results")])
    assert done.exit_code == 1
    assert "pre-flight" in done.output and "HTTP 401" in done.output, done.output
    assert KEY not in done.output


def test_a_providers_error_text_cannot_style_or_break_the_output(
    keyed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rich markup and terminal escapes in the provider's message are shown as text."""
    nasty = "bad key [/bold] [link=http://x]x[/link] \x1b[2J\x1b]0;title\x07\r\nnext line"
    monkeypatch.setattr("tests.agents.fake_provider._Handler._send", _error_send(nasty))
    before = _home_files(keyed)
    with FakeProvider(lambda r: Reply(status=401)) as provider:
        path = providers_file(tmp_path, provider)
        done = _run(tmp_path, path)
        monkeypatch.setenv("ARI_PROVIDERS", str(path))
        args = ["doctor", "--provider", "fake", "--model", "fake-model"]
        doctor = CliRunner().invoke(cli, [*args, "--results", str(REPO / "results")])
    line = _refused_cleanly(done, tmp_path, keyed, before)
    assert "\x1b" not in line and "\x07" not in line and "[/bold]" in line, line
    assert doctor.exit_code == 1 and not isinstance(doctor.exception, Exception), doctor.output
    assert "\x1b" not in doctor.output and "[/bold]" in doctor.output, doctor.output


@pytest.mark.slow
def test_an_invalid_runs_reason_is_printed_once(keyed: Path, tmp_path: Path) -> None:
    """The provider answers the pre-flight, then fails every call and every probe: the run is
    `invalid`, and `toolkit run` shows why once, not once per place that noted it."""
    seen: list[int] = []

    def model(request: Request) -> Reply:
        seen.append(1)
        return Reply(text="OK") if len(seen) == 1 else Reply(status=500)

    with FakeProvider(model) as provider:
        args = ["--budget", "30"]
        done = CliRunner().invoke(
            cli,
            [
                "run",
                "--agent",
                "opencode",
                "--provider",
                "fake",
                "--providers",
                str(providers_file(tmp_path, provider)),
                "--model",
                "fake-model",
                "--seed",
                "0",
                "--track",
                "demo-cpu-3",
                "--device",
                "cpu",
                "--results",
                str(tmp_path / "results"),
                *args,
            ],
        )
    assert done.exit_code == 1, done.output
    marker = "the harness's own probe call failed too"
    print(done.output)
    assert done.output.count(marker) == 1, done.output
    assert "invalid" in done.output
