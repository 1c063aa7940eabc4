"""Session-wide test settings: the toolkit's state dir is a temporary folder, never ~/.cache."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
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


# -- the Docker engine (docker backend tests; see tests/docker_engine.py) -----------------------
_engine_failure: list[str] = []


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[object]:
    """A real Docker engine with the project's images, for the whole session (else skip/fail)."""
    from tests import docker_engine as support

    if _engine_failure:
        support.unavailable(_engine_failure[0])
    try:
        engine = support.start_engine()
    except Exception as exc:
        _engine_failure.append(f"{type(exc).__name__}: {exc}")
        support.unavailable(_engine_failure[0])
    print(f"\ndocker engine: {engine.how} in {engine.setup_s:.1f}s ({engine.host})")
    yield engine
    support.stop_engine(engine)
