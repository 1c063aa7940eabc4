"""The opencode adapter's parts without a run: events, providers, config, version pin, effort.

Event lines are verbatim from opencode 1.18.33 (its stdout with `--format json` and its log
with `--print-logs`), so a parser change that breaks on the real format fails here.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from toolkit.agents import AGENTS, AgentSetupError, OpencodeAgent, get_agent
from toolkit.agents.opencode import ALLOWED_TOOLS, PLACEHOLDER_KEY, SWITCHES, scaffold_config
from toolkit.agents.opencode_events import EventTally
from toolkit.agents.providers import (
    DEFAULT_FILE,
    Provider,
    ProviderError,
    get_provider,
    load_providers,
)
from toolkit.agents.scaffold import OPENCODE_VERSION, ScaffoldError, binary_version
from toolkit.cli import cli

STEP_FINISH = (
    '{"type":"step_finish","timestamp":1795433837338,"sessionID":"ses_df7cdd70effeJoEBS032v4nZBd"'
    ',"part":{"id":"prt_2083232f2001rcF8HDoe8PmoLl","reason":"tool-calls","messageID":"msg_2083'
    '22de2001fSrViGD7FlQJZM","sessionID":"ses_df7cdd70effeJoEBS032v4nZBd","type":"step-finish",'
    '"tokens":{"total":120,"input":70,"output":15,"reasoning":5,"cache":{"write":0,"read":30}},'
    '"cost":0}}'
)
PROVIDER_ERROR = (
    '{"type":"error","timestamp":1795434154909,"sessionID":"ses_df7c9f2e7ffeXWCKfvclgNJ0eQ",'
    '"error":{"name":"APIError","data":{"message":"boom","statusCode":500,"isRetryable":true,'
    '"metadata":{"url":"http://127.0.0.1:18556/v1/chat/completions"}}}}'
)
STREAM_ERROR = (
    'timestamp=2026-11-23T11:42:48.240Z level=ERROR run=f0989157 message="stream error" '
    "providerID=ari modelID=fake-model session.id=ses_df7c8c541ffec2cw4i12wXoIik small=false "
    'agent=build mode=primary error.error="AI_APICallError: boom"'
)


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_usage_is_summed_over_steps_and_odd_lines_are_kept() -> None:
    tally = EventTally()
    for line in (STEP_FINISH, "not json at all", '{"type":"brand_new_event","x":1}', "[1,2]"):
        tally.event(line)
    tally.event(STEP_FINISH.replace('"cost":0', '"cost":0.25'))
    tally.event('{"type":"step_finish","part":{"tokens":"garbled"}}')
    usage = tally.usage()
    assert (usage.input_tokens, usage.output_tokens, usage.reasoning_tokens) == (140, 30, 10)
    assert (usage.cache_read_tokens, usage.cache_write_tokens) == (60, 0)
    assert usage.cost_usd == 0.25
    assert tally.session_id == "ses_df7cdd70effeJoEBS032v4nZBd"
    assert tally.unknown_types == {"brand_new_event"}
    assert tally.claim() is None


def test_no_steps_no_usage_and_no_price_no_cost() -> None:
    assert EventTally().usage().input_tokens is None
    tally = EventTally()
    tally.event(STEP_FINISH)
    assert tally.usage().cost_usd is None and tally.usage().input_tokens == 70


def test_a_provider_error_event_is_only_the_scaffolds_claim() -> None:
    """What the scaffold prints is the model's to forge: it is shown, never decides."""
    tally = EventTally()
    shown = tally.event(PROVIDER_ERROR)
    assert shown and "HTTP 500" in shown
    assert tally.claim() == "APIError: HTTP 500: boom"
    assert not hasattr(tally, "problem")


def test_other_scaffold_errors_are_no_provider_claim() -> None:
    tally = EventTally()
    tally.event('{"type":"error","error":{"name":"MessageOutputLengthError","data":{}}}')
    assert tally.claim() is None and tally.other_errors


def test_failing_calls_in_the_scaffolds_log_are_claimed_and_a_step_resets_them() -> None:
    clock = _Clock()
    tally = EventTally(clock=clock)
    tally.log("timestamp=... level=INFO message=loop step=0")
    tally.log(STREAM_ERROR)
    clock.now += 20
    tally.log(STREAM_ERROR)
    assert tally.claim() == "2 model call(s) failed in a row over 20s, last: AI_APICallError: boom"
    tally.event(STEP_FINISH)  # the provider answered: the spell is over
    assert tally.claim() is None


def test_the_shipped_providers_file_has_the_native_clients() -> None:
    providers = load_providers(DEFAULT_FILE)
    assert {"openai", "anthropic", "google"} <= set(providers)
    assert providers["anthropic"].egress.host == "api.anthropic.com"
    assert providers["anthropic"].egress.port == 443
    assert all(p.native == (p.kind != "openai-compatible") for p in providers.values())


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[x]\nkind = "nope"\nkey_env = "K"\n', "kind must be one of"),
        ('[x]\nkind = "openai-compatible"\nkey_env = "K"\n', "base_url is required"),
        ('[x]\nkind = "openai"\nkey_env = "bad name"\n', "key_env"),
        ('[x]\nkind = "openai"\nkey_env = "K"\napi_key = "sk-1"\n', "unknown field"),
        ('[x]\nkind = "openai"\nbase_url = "ftp://h"\nkey_env = "K"\n', r"http\(s\) URL"),
        ('[x]\nkind = "openai"\nkey_env = "K"\n[x.cost]\ninput = -1\n', "non-negative"),
        ("[x\n", "not valid TOML"),
    ],
)
def test_a_bad_providers_file_is_one_clear_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "providers.toml"
    path.write_text(text)
    with pytest.raises(ProviderError, match=message) as info:
        load_providers(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_unknown_provider_lists_the_known(tmp_path: Path) -> None:
    with pytest.raises(ProviderError, match=r"known: anthropic, deepseek, google"):
        get_provider("nobody", DEFAULT_FILE)


def test_the_config_allows_the_protocols_tools_and_holds_no_key() -> None:
    provider = Provider("fake", "openai-compatible", "http://h:1/v1", "FAKE_KEY")
    config = scaffold_config(provider, "m1", {"reasoningEffort": "low"})
    permission = config["permission"]
    assert isinstance(permission, dict)
    assert permission.pop("*") == "deny" and set(permission) == set(ALLOWED_TOOLS)
    assert list(config["provider"]) == ["fake"]  # type: ignore[call-overload]
    text = json.dumps(config)
    assert PLACEHOLDER_KEY in text and '"reasoningEffort": "low"' in text
    assert config["provider"]["fake"]["options"]["baseURL"] == "http://h:1/v1"  # type: ignore[index]
    relayed = scaffold_config(provider, "m1", {}, base_url="http://127.0.0.1:9/v1")
    assert relayed["provider"]["fake"]["options"]["baseURL"] == "http://127.0.0.1:9/v1"  # type: ignore[index]
    for off in ("autoupdate", "snapshot", "lsp", "formatter"):
        assert config[off] is False
    assert config["share"] == "disabled" and config["plugin"] == []
    assert {"OPENCODE_DISABLE_MODELS_FETCH", "OPENCODE_DISABLE_LSP_DOWNLOAD"} <= set(SWITCHES)


def test_opencode_is_a_known_agent() -> None:
    assert set(AGENTS) == {"scripted", "opencode"}


def _fake_binary(tmp_path: Path, version: str) -> Path:
    path = tmp_path / "opencode"
    path.write_text(f"#!/bin/sh\necho {version}\n")
    path.chmod(0o755)
    return path


def test_another_scaffold_version_is_refused_unless_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARI_OPENCODE_BIN", str(_fake_binary(tmp_path, "0.9.1")))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")
    with pytest.raises(AgentSetupError, match=f"pinned to {OPENCODE_VERSION}") as info:
        get_agent("opencode", provider="openai", model="gpt-5")
    assert "--any-scaffold-version" in str(info.value)
    if not os.path.exists("/usr/bin/rg") and not any(
        os.access(os.path.join(d, "rg"), os.X_OK) for d in os.environ["PATH"].split(":")
    ):
        return  # the rest needs ripgrep, which test-setup installs
    agent = get_agent("opencode", provider="openai", model="gpt-5", any_version=True)
    assert isinstance(agent, OpencodeAgent) and agent.version == "0.9.1"


def test_the_version_is_asked_once_per_binary_and_again_when_it_changes(
    tmp_path: Path,
) -> None:
    """`opencode --version` costs the real binary about a CPU second: asked once a process
    for a binary, again for a binary replaced or rewritten at the same path."""
    asked = tmp_path / "asked"
    path = tmp_path / "opencode"
    path.write_text(f"#!/bin/sh\necho x >> {asked}\necho 1.0.0\n")
    path.chmod(0o755)
    assert binary_version(path) == binary_version(path) == "1.0.0"
    assert asked.read_text() == "x\n"
    replaced = tmp_path / "new"
    replaced.write_text(f"#!/bin/sh\necho y >> {asked}\necho 1.0.1\n")
    replaced.chmod(0o755)
    replaced.replace(path)
    assert binary_version(path) == "1.0.1"
    assert asked.read_text() == "x\ny\n"
    with pytest.raises(ScaffoldError, match="cannot run"):
        binary_version(tmp_path / "missing")


def test_the_cli_says_what_is_missing_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARI_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    runner = CliRunner()
    base = ["run", "--agent", "opencode", "--model", "gpt-5", "--seed", "0"]
    for extra, message in (
        ([], "needs --provider"),
        (["--provider", "nobody"], "no provider 'nobody'"),
        (["--provider", "openai"], "$OPENAI_API_KEY, which is not set"),
    ):
        done = runner.invoke(cli, [*base, *extra])
        assert done.exit_code == 2, done.output
        assert message in done.output and "Traceback" not in done.output


def test_effort_of_a_native_client_must_be_one_the_scaffold_knows(
    opencode_binary: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Native clients get the scaffold's own variant for the effort; an unknown one would be
    silently dropped by the scaffold, so the harness refuses it."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-0123456789")
    with pytest.raises(AgentSetupError, match=r"known: high, max"):
        OpencodeAgent.for_run(provider="anthropic", model="claude-sonnet-4-5", effort="medium")
    agent = OpencodeAgent.for_run(provider="anthropic", model="claude-sonnet-4-5", effort="high")
    model = agent.config["provider"]["anthropic"]["models"]["claude-sonnet-4-5"]  # type: ignore[index]
    assert model["options"] == {"thinking": {"type": "enabled", "budgetTokens": 16000}}


def test_a_campaign_builds_the_opencode_agent_with_its_provider_settings(
    opencode_binary: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A campaign's model entry may name a provider the file lacks, with its own URL and key
    variable: an OpenAI-compatible provider; the scripted agent takes no such setting."""
    from toolkit.campaign.config import CampaignError
    from toolkit.campaign.job import Job, build_agent
    from toolkit.tracks.model import get_track

    monkeypatch.setenv("VLLM_API_KEY", "sk-test-0123456789")
    track = get_track(Path(__file__).resolve().parents[2] / "results", "demo-cpu-3")
    job = Job(
        track=track,
        model="my-model",
        effort="high",
        seed=0,
        agent="opencode",
        provider="vllm",
        base_url="http://10.0.0.5:8000/v1",
        key_env="VLLM_API_KEY",
        backend="local",
        results_dir=str(tmp_path),
    )
    agent = build_agent(job)
    assert isinstance(agent, OpencodeAgent) and agent.provider == "vllm"
    assert agent.provider_entry.base_url == "http://10.0.0.5:8000/v1"
    assert agent.egress() == []  # the relay's address, once the run prepared it
    assert agent.config["provider"]["vllm"]["models"]["my-model"]["options"] == {  # type: ignore[index]
        "reasoningEffort": "high"
    }
    with pytest.raises(CampaignError, match="VLLM_API_KEY, which is not set"):
        monkeypatch.delenv("VLLM_API_KEY")
        build_agent(job)
    with pytest.raises(CampaignError, match="takes no provider"):
        build_agent(job.model_copy(update={"agent": "scripted", "base_url": None, "key_env": None}))


def test_usage_comes_from_the_provider_where_it_reported_any(tmp_path: Path) -> None:
    """The relay's counts (the provider's own usage fields) win over the scaffold's sums; the
    result says which it is, and the cost comes from the providers file's prices if any."""
    from toolkit.agents.provider_api import Credential, Tokens

    provider = Provider(
        "fake", "openai-compatible", "http://h:1/v1", "K", cost={"input": 2.0, "output": 10.0}
    )
    agent = OpencodeAgent(
        provider,
        model="m",
        effort=None,
        api_key="sk-test-0123456789",
        binary=tmp_path / "opencode",
        version=OPENCODE_VERSION,
        ripgrep=tmp_path / "rg",
    )
    agent.tally.event(STEP_FINISH)  # the scaffold says: 70 in, 15 out, 5 reasoning, 30 cached
    usage = agent.usage()
    assert (usage.source, usage.input_tokens, usage.model_calls) == ("scaffold", 70, None)
    from toolkit.agents.relay.front import ProviderRelay

    agent.relay = ProviderRelay(
        kind="openai-compatible",
        base_url=provider.base_url,
        model="m",
        key="sk-test-0123456789",
        credential=Credential("Authorization", "Bearer "),
    )
    totals = agent.relay.totals
    totals.calls, totals.bytes_up, totals.bytes_down = 3, 3000, 900
    usage = agent.usage()  # calls went through, but the provider reported no usage
    assert (usage.source, usage.input_tokens, usage.model_calls) == ("scaffold", 70, 3)
    totals.with_usage, totals.tokens = 3, Tokens(input=1_000_000, output=100_000, reasoning=50)
    usage = agent.usage()
    assert (usage.source, usage.input_tokens, usage.output_tokens) == (
        "provider",
        1_000_000,
        100_000,
    )
    assert (usage.bytes_sent, usage.bytes_received) == (3000, 900)
    assert usage.cost_usd == 3.0005 and usage.cost_source == "providers-file"
