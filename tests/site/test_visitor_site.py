"""A visitor's site (issue 51 items 3 and 4): the run page names the trusted list that holds
a run's signing key, never the folder's own hint; one mkdocs build for the module."""

from __future__ import annotations

from pathlib import Path

import pytest
from site_fixture import build, run_dict, track_dict, write_registry, write_run

from toolkit.results import signing


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("visitor")
    results = root / "results"
    write_registry(results, [track_dict()])
    write_run(results, run_dict("signed", model="model-a", passed=40))
    done = build(results, root / "public")
    assert done.returncode == 0, done.stdout + done.stderr
    return root / "public"


def test_the_run_page_names_the_trusted_list_that_holds_the_key(site: Path) -> None:
    row = (site / "rows" / "v1-test" / "model-a.html").read_text(encoding="utf-8")
    assert "holds: key <code>ed25519:" in row
    assert "pinned in the pinned key list pinned_keys.json" in row, row
    assert "this results folder's signing_keys.json" not in row


def test_which_list_holds_a_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARI_HOME", str(tmp_path / "home"))
    monkeypatch.delenv(signing.TRUSTED_KEYS_ENV, raising=False)
    mine = signing.local_public()
    assert signing.trusted_list_of(mine.id).startswith("this machine's own key")
    pins = tmp_path / "ours.json"
    signing.trust_file(pins, mine)
    monkeypatch.setenv(signing.TRUSTED_KEYS_ENV, str(pins))
    assert signing.trusted_list_of(mine.id).startswith("the pinned key list ours.json")
    assert signing.trusted_list_of("ed25519:0000000000000000") == "no pinned list (not trusted)"
