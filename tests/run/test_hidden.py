"""What the runner and the controller of a run hide (`roles.run_hidden`), checked as a list.

The runs themselves (`test_run.py`, `test_hostile_agent.py`) show the list at work; this checks
that nothing on it is dropped on the way to the sandbox.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkit.paths import state_dir
from toolkit.protected import checkout_root, protected_paths
from toolkit.run import roles


def test_the_list_holds_every_protected_path_and_the_runs_own(tmp_path: Path) -> None:
    exam = tmp_path / "exams" / "exam.jsonl"
    exam.parent.mkdir()
    exam.write_text("{}\n")
    results = tmp_path / "results"
    results.mkdir()
    bank = tmp_path / "bank"
    bank.mkdir()
    hidden = roles.run_hidden(exam=exam, results_dir=results, extra=[bank])
    assert set(protected_paths()) <= set(hidden)
    assert {exam, exam.parent, results, bank} <= set(hidden)
    assert state_dir() in hidden and checkout_root() in hidden


def test_a_folder_holding_the_workspace_is_passed_on_not_dropped(tmp_path: Path) -> None:
    workspace = state_dir() / "runs" / "r1" / "workspace"
    workspace.mkdir(parents=True)
    hidden = roles.existing([state_dir(), tmp_path / "missing"])
    assert hidden == [state_dir()]  # contains the root: the sandbox keeps the root visible


@pytest.mark.parametrize("folder", ["/", "/etc", "/usr", "/var"])
def test_an_exam_directly_in_a_system_folder_is_refused(folder: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="keep the exam in a folder of its own"):
        roles.run_hidden(exam=Path(folder) / "exam.jsonl", results_dir=tmp_path)
