"""A cost cap that cannot hold is refused before the clock (issue 29 item 1).

Shipped providers carry no prices, so `--max-cost-usd 0.001` used to run unenforced ("cost
unknown (no prices)") and record $0.0198 spent with budget_spent false. Now an explicit cap
on a provider the relay cannot price is refused in one line with the fix, before the provider
pre-flight and before anything is written; the track's own cap gets a one-line note."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.agents.conftest import KEY, providers_file
from tests.agents.fake_provider import FakeProvider, Reply
from toolkit.agents.providers import cost_cap_check, cost_cap_note, load_providers
from toolkit.cli import cli

REPO = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, providers: Path, *extra: str) -> list[str]:
    args = ["run", "--agent", "opencode", "--provider", "fake", "--providers", str(providers)]
    args += ["--model", "fake-model", "--seed", "0", "--track", "demo-cpu-3", "--device", "cpu"]
    args += ["--results", str(tmp_path / "results"), "--quiet", *extra]
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 2, done.output
    return [line for line in done.output.splitlines() if line.strip()]


def test_an_unpriced_cost_cap_is_refused_before_anything(
    opencode_binary: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_PROVIDER_KEY", KEY)
    with FakeProvider(lambda r: Reply()) as provider:
        lines = _run(tmp_path, providers_file(tmp_path, provider), "--max-cost-usd", "0.001")
        assert provider.requests == []  # not even the pre-flight call
    assert len(lines) == 1, lines
    assert "--max-cost-usd 0.001" in lines[0] and "[fake.cost]" in lines[0]
    assert "--max-tokens-total" in lines[0]
    assert not (tmp_path / "results").exists()


def test_which_providers_can_hold_a_cost_cap(tmp_path: Path) -> None:
    shipped = load_providers(REPO / "toolkit" / "agents" / "providers.toml")
    assert shipped["openrouter"].priced  # reports its cost with the usage
    for name in ("openai", "anthropic", "google", "deepseek"):
        assert not shipped[name].priced
        assert cost_cap_check(shipped[name], 0.5) is not None
        assert "cannot hold" in (cost_cap_note(shipped[name], 250.0) or "")
        assert cost_cap_check(shipped[name], None) is None  # the track's: a note only
    path = tmp_path / "p.toml"
    path.write_text(
        '[mine]\nkind = "openai"\nkey_env = "K"\n[mine.cost]\ninput = 1.25\noutput = 10.0\n'
    )
    mine = load_providers(path)["mine"]
    assert mine.priced and cost_cap_check(mine, 0.001) is None
    assert cost_cap_note(mine, 250.0) is None
    half = tmp_path / "half.toml"
    half.write_text('[h]\nkind = "openai"\nkey_env = "K"\n[h.cost]\ninput = 1.25\n')
    assert not load_providers(half)["h"].priced  # output unpriced: the cap could be outrun
    assert cost_cap_check(None, 0.001) is None  # the scripted agent calls no model


def test_a_campaign_whose_cost_cap_cannot_hold_refuses_to_start(
    opencode_binary: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_PROVIDER_KEY", KEY)
    path = tmp_path / "campaign.toml"
    path.write_text(
        'track = "demo-cpu-3"\nagent = "opencode"\nseeds = [0]\nbudget_s = 60\n'
        'results = "results"\nmax_cost_usd = 0.5\n'
        '[[models]]\nname = "m1"\nprovider = "fake"\n'
    )
    with FakeProvider(lambda r: Reply()) as provider:
        monkeypatch.setenv("ARI_PROVIDERS", str(providers_file(tmp_path, provider)))
        done = CliRunner().invoke(cli, ["campaign", "run", str(path)])
        assert provider.requests == []  # refused before any call
    assert done.exit_code == 1, done.output
    assert "model 'm1': max_cost_usd 0.5: provider 'fake' has no prices" in done.output
    assert not (tmp_path / "results").exists()
