"""A run that cannot have its track's isolation floor does not start (and leaves nothing)."""

from __future__ import annotations

import dataclasses

import pytest

from tests.run.conftest import MAKE_BUNDLE, ShellAgent, SpecFactory
from toolkit.run.orchestrate import execute_run
from toolkit.run.workspace import WorkspaceError
from toolkit.sandbox.local import host as local_host


def test_a_run_without_per_tree_memory_caps_is_refused(
    make_spec: SpecFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    weak = dataclasses.replace(local_host.probe(), memory_parent=None, pids_parent=None)
    # a cgroup-v2 host, say, before delegation
    monkeypatch.setattr(local_host, "probe", lambda: weak)
    spec = make_spec(ShellAgent(MAKE_BUNDLE), budget=30, per_call=20, reserved=5)
    spec.track = spec.track.model_copy(
        update={"isolation_floor": ["roles-isolated", "memory-per-tree", "processes-per-tree"]}
    )
    with pytest.raises(WorkspaceError) as info:
        execute_run(spec)
    text = str(info.value)
    assert "memory-per-tree" in text and "processes-per-tree" in text
    assert "roles-isolated" not in text
    assert "--backend docker" in text
    assert not spec.results_dir.exists() or list(spec.results_dir.rglob("*.json")) == []
