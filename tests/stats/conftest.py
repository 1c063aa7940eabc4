"""Statistics tests never touch a real state dir or the repo's results/."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _tmp_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARI_HOME", str(tmp_path / "ari-home"))
