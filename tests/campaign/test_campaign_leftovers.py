"""A campaign's run leaves nothing in $ARI_HOME/runs once it is finished, ended or
interrupted, as `toolkit run` does (issue 39: campaign and interrupted runs kept their
workspaces); a run whose harness died keeps its folder for `runs recover`."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from toolkit.campaign import child
from toolkit.run.interrupt import Interrupted
from toolkit.run.recovery import MARKER, PIDS, runs_root


def _fake_run(ends: str) -> Any:
    def execute_run(spec: Any) -> str:
        harness = runs_root() / spec.run_id / "harness"
        harness.mkdir(parents=True)
        (harness / PIDS).write_text("")  # a run that started processes
        if ends == "died":
            (harness / MARKER).write_text("{")  # its marker stays: never touched
        if ends in ("interrupted", "died"):
            raise Interrupted("SIGTERM", 143)
        return "result"

    return execute_run


@pytest.mark.parametrize("ends", ["ended", "interrupted"])
def test_a_finished_runs_folder_goes(
    ends: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARI_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(child, "execute_run", _fake_run(ends))
    spec: Any = SimpleNamespace(run_id=f"run-{ends}")
    if ends == "interrupted":
        with pytest.raises(Interrupted):
            child.execute_and_discard(spec)
    else:
        assert child.execute_and_discard(spec) == "result"
    assert not (runs_root() / spec.run_id).exists()


def test_a_run_whose_harness_died_keeps_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARI_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(child, "execute_run", _fake_run("died"))
    spec: Any = SimpleNamespace(run_id="run-died")
    with pytest.raises(Interrupted):
        child.execute_and_discard(spec)
    assert (runs_root() / "run-died" / "harness" / MARKER).exists()
