"""Fixtures for the sandbox suite: every backend runs the same tests (docker: see below).

Each test gets its own ARI_HOME and sandbox root in a tmp dir. `leftover` finds host processes
that carry a test's marker in their command line: that is how the tests check that nothing of a
killed tree survived, since pids printed inside a PID namespace mean nothing on the host.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolkit.sandbox import BACKENDS, Sandbox, create_sandbox
from toolkit.sandbox.local import host as local_host

PY = sys.executable


@pytest.fixture(autouse=True)
def _ari_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARI_HOME", str(tmp_path / "ari-home"))


DEGRADED = "local-without-namespaces"


@pytest.fixture(params=[*BACKENDS, DEGRADED])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each backend, plus the local one as a host without namespaces or cgroups has it.

    The degraded variant is how the local backend runs for a non-root user: the suite checks
    that it still keeps the contract, and skips only what such a host cannot provide.
    """
    if request.param == DEGRADED:
        degraded = dataclasses.replace(  # the keyring filter needs no namespaces: kept
            local_host.probe(),
            namespaces=False,
            userns=False,
            is_root=False,
            pids_parent=None,
            memory_parent=None,
            cpu_parent=None,
            mount_setattr=False,
        )
        monkeypatch.setattr(local_host, "probe", lambda: degraded)
        return "local"
    if request.param == "docker":
        request.getfixturevalue("docker_engine")  # a real engine, or skip (fail in CI)
    return str(request.param)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The docker backend runs the modules that opt in (`DOCKER_BACKEND = True`): the others
    call the host's interpreter by path, which no image has; tests/docker/ attacks docker."""
    keep = []
    here = Path(__file__).parent
    for item in items:
        callspec = getattr(item, "callspec", None)
        module = getattr(item, "module", None)
        if (
            here in Path(str(item.path)).parents
            and callspec is not None
            and callspec.params.get("backend") == "docker"
            and not getattr(module, "DOCKER_BACKEND", False)
        ):
            continue
        keep.append(item)
    items[:] = keep


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path


@pytest.fixture
def box(backend: str, root: Path) -> Iterator[Sandbox]:
    with create_sandbox(backend, root=root) as sandbox:
        yield sandbox


@pytest.fixture
def marker() -> str:
    return f"ari-marker-{uuid.uuid4().hex}"


def leftover(marker: str) -> list[int]:
    """Host pids whose command line contains `marker` (zombies included until reaped)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found
