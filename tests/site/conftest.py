"""Site tests build the mkdocs site from fixtures made in tmp dirs, never from results/."""

from __future__ import annotations

from pathlib import Path

import pytest
from site_fixture import build, make_fixture


@pytest.fixture(autouse=True)
def _tmp_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARI_HOME", str(tmp_path / "ari-home"))


@pytest.fixture(scope="session")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture site (two tracks, every status), built once for the whole session."""
    root = tmp_path_factory.mktemp("site")
    make_fixture(root / "results")
    done = build(root / "results", root / "public")
    assert done.returncode == 0, done.stdout + done.stderr
    return root / "public"
