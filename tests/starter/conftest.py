"""The starter is what an agent receives: plain scripts that import each other as siblings
(`from model import GPT`), run from the workspace as `python starter/train.py`. The tests put
its folder on sys.path the same way."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

STARTER = Path(__file__).resolve().parents[2] / "toolkit" / "starter"
if str(STARTER) not in sys.path:
    sys.path.insert(0, str(STARTER))


@pytest.fixture(autouse=True)
def _state_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # tests/conftest.py points ARI_HOME at a session-wide temporary folder (the default corpus
    # is extracted there once); make sure of it even when this folder is run on its own.
    if not os.environ.get("ARI_HOME"):
        monkeypatch.setenv("ARI_HOME", str(tmp_path_factory.mktemp("ari-home")))
