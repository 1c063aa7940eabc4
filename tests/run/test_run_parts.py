"""The parts of a run, alone (the whole run: test_run.py and its neighbours): each step takes
what it needs and returns what it made, and a step that fails gives back what it took."""

from __future__ import annotations

import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.run.conftest import ShellAgent, SpecFactory
from toolkit.run.agent_log import quiet
from toolkit.run.live import Timeline
from toolkit.run.outcome import Publication, SessionRecord
from toolkit.run.start import read_inputs, take_premises
from toolkit.run.storage import reserve_path
from toolkit.run.workspace import STARTER_DIR


def test_the_timeline_says_the_step_and_when_the_hidden_grading_began() -> None:
    timeline = Timeline()
    assert timeline.current == "set-up" and timeline.hidden_since() is None
    timeline.enter("the agent's session")
    began = timeline.enter("the final grading of c001", hidden=True)
    timeline.enter("publishing")
    assert timeline.current == "publishing" and timeline.hidden_since() == began


def test_premises_that_fail_give_back_the_reserve_and_leave_no_workspace_cap(
    make_spec: SpecFactory, tmp_path: Path
) -> None:
    starter = tmp_path / "starter"
    shutil.copytree(STARTER_DIR, starter, ignore=shutil.ignore_patterns("__pycache__"))
    (starter / "notes.txt").write_text("the key is sk-parts-leak-0042\n")
    spec = make_spec(ShellAgent("true"), budget=60, per_call=30, reserved=5)
    spec.starter, spec.secrets = starter, ["sk-parts-leak-0042"]
    inputs = read_inputs(spec, quiet)
    with pytest.raises(RuntimeError, match="would contain the exam or a secret"):
        take_premises(inputs)
    assert not reserve_path(inputs.artifacts).exists()
    workspace = inputs.work / "workspace"
    assert not workspace.is_mount()


def test_the_publication_alone_publishes_once_ending_at_the_hidden_grading(
    make_spec: SpecFactory,
) -> None:
    spec = make_spec(ShellAgent("true"), budget=60, per_call=30, reserved=5)
    inputs = read_inputs(spec, quiet)
    inputs.artifacts.mkdir(parents=True)
    premises = take_premises(inputs)
    try:
        timeline = Timeline()
        publication = Publication(inputs, premises, ["runner:netns"], timeline)
        skeleton = publication.skeleton("the harness died before the run finished")
        assert skeleton.status == "invalid" and skeleton.config.isolation == ["runner:netns"]
        assert skeleton.started_at == inputs.started_at
        assert skeleton.config.task_brief_sha256 == premises.workspace.task_brief_sha256
        time.sleep(0.05)
        began = timeline.enter("the final grading of c001", hidden=True)
        started = datetime.now(UTC) - timedelta(seconds=30)
        record = SessionRecord(started_at=started, used_s=12.34567, runner_s=3.21)
        result = publication.publish(
            publication.invalid("the probe failed too", "provider"), record
        )
        assert publication.published
        assert result.status == "invalid" and result.evidence is not None
        assert result.evidence.check == "provider"
        assert result.started_at == started and result.finished_at == began
        assert (result.timings.used_s, result.timings.runner_s) == (12.346, 3.21)
        saved = spec.results_dir / spec.track.id / f"{inputs.run_id}.json"
        assert saved.is_file()
        # What was written after the hidden grading began carries that time, no later one.
        assert abs(saved.stat().st_mtime - began.timestamp()) < 0.01
        log = (inputs.artifacts / "agent.log").read_text()
        assert log.rstrip().endswith("result: invalid 0.0% (the probe failed too)")
    finally:
        premises.release()
    assert not reserve_path(inputs.artifacts).exists()
