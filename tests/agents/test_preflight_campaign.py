"""`toolkit campaign run` asks each model's provider once before anything starts: a model whose
provider fails is named in one line and the campaign refuses to start, unless
--skip-failing-models leaves that model's runs out.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.agents.conftest import KEY, providers_file
from tests.agents.fake_provider import FakeProvider, Reply, Request
from toolkit.campaign.config import CampaignError
from toolkit.campaign.preflight import check_models, without
from toolkit.campaign.setup import open_campaign
from toolkit.cli import cli

BAD_KEY = "sk-ari-revoked-9f8e7d6c5b"


def _by_key(request: Request) -> Reply:
    """The provider knows one key: the other is refused."""
    if request.headers.get("Authorization") == f"Bearer {KEY}":
        return Reply(text="OK")
    return Reply(status=401)


def _campaign(folder: Path) -> Path:
    """Two models of the fake provider, the second with a key the provider refuses."""
    lines = [
        'track = "demo-cpu-3"',
        'agent = "opencode"',
        "seeds = [0, 1]",
        "budget_s = 60",
        'results = "results"',
        '\n[[models]]\nname = "good-model"\nprovider = "fake"',
        '\n[[models]]\nname = "bad-model"\nprovider = "fake"\nkey_env = "BAD_PROVIDER_KEY"',
    ]
    path = folder / "campaign.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def keys(opencode_binary: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_PROVIDER_KEY", KEY)
    monkeypatch.setenv("BAD_PROVIDER_KEY", BAD_KEY)


def test_a_campaign_with_a_failing_model_refuses_to_start(
    keys: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeProvider(_by_key) as provider:
        monkeypatch.setenv("ARI_PROVIDERS", str(providers_file(tmp_path, provider)))
        done = CliRunner().invoke(cli, ["campaign", "run", str(_campaign(tmp_path))])
    assert done.exit_code == 1, done.output
    lines = [line for line in done.output.splitlines() if line.strip()]
    named = [line for line in lines if line.startswith("model '")]
    assert len(named) == 1 and named[0].startswith("model 'bad-model': "), done.output
    assert "HTTP 401" in named[0] and "pre-flight" in named[0]
    assert "1 model(s) failed the provider pre-flight check" in done.output
    assert "--skip-failing-models" in done.output
    assert "good-model" not in done.output
    assert KEY not in done.output and BAD_KEY not in done.output
    # One call per model, nothing else: no run started, nothing written.
    assert len(provider.requests) == 2
    assert not (tmp_path / "results").exists()


def test_skip_failing_models_leaves_out_their_runs_only(
    keys: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeProvider(_by_key) as provider:
        monkeypatch.setenv("ARI_PROVIDERS", str(providers_file(tmp_path, provider)))
        campaign = open_campaign(_campaign(tmp_path))
        failing = check_models(campaign, campaign.plan())
        assert [(f.model, f.runs) for f in failing] == [("bad-model", 2)]
        kept = without(campaign, {f.model for f in failing})
    assert {p.key.model for p in kept.plan()} == {"good-model"}
    assert len(kept.plan()) == 2
    with pytest.raises(CampaignError, match="every model"):
        without(campaign, {"good-model", "bad-model"})


def test_skip_failing_models_with_no_model_left_refuses_to_start(
    keys: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeProvider(lambda r: Reply(status=503)) as provider:
        monkeypatch.setenv("ARI_PROVIDERS", str(providers_file(tmp_path, provider)))
        args = ["campaign", "run", str(_campaign(tmp_path)), "--skip-failing-models"]
        done = CliRunner().invoke(cli, args)
    assert done.exit_code == 1, done.output
    notes = [line for line in done.output.splitlines() if line.startswith("note: leaving out")]
    assert len(notes) == 2 and all("HTTP 503" in n for n in notes), done.output
    assert "every model of the campaign failed" in done.output
    assert not (tmp_path / "results").exists()


def test_a_model_without_its_key_fails_the_check(
    keys: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BAD_PROVIDER_KEY")
    with FakeProvider(_by_key) as provider:
        monkeypatch.setenv("ARI_PROVIDERS", str(providers_file(tmp_path, provider)))
        campaign = open_campaign(_campaign(tmp_path))
        failing = check_models(campaign, campaign.plan())
    assert [f.model for f in failing] == ["bad-model"]
    assert "BAD_PROVIDER_KEY" in failing[0].problem and "not set" in failing[0].problem
    assert len(provider.requests) == 1  # only the good model was asked
