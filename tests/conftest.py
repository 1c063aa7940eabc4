"""Session-wide test settings: the toolkit's state dir is a temporary folder, never ~/.cache."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

# One state dir for the whole session so that the default corpus is extracted once (a few
# seconds), not once per test. Set at import time so that subprocesses inherit it too.
_STATE = Path(tempfile.mkdtemp(prefix="ari-test-home-"))
os.environ.setdefault("ARI_HOME", str(_STATE))


@pytest.fixture
def repo_root() -> Path:
    """The repository root (tests run from a checkout)."""
    return Path(__file__).resolve().parent.parent
