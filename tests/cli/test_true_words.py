"""Words that are true (issue 51 item 3): a budget override says at the start that the run
will never be counted, and an interrupted (invalid) run's summary shows no score, as
`runs list` and the board do."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from tests.stats.results_factory import run_dict
from toolkit.cli import cli
from toolkit.commands import run as run_module
from toolkit.results.model import RunResult
from toolkit.results.summary import print_result
from toolkit.run.spec import budget_override_note
from toolkit.tracks.model import RegistryError, get_track

REPO = Path(__file__).resolve().parents[2]


def test_a_budget_override_is_said_never_counted_before_the_run_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def stop(*_args: object) -> None:  # the first step after the notes: stop the run there
        raise RegistryError("stopped by the test before any work")

    monkeypatch.setattr(run_module, "carry_track", stop)
    (tmp_path / "results").mkdir()
    args = ["run", "--agent", "scripted", "--track", "demo-cpu-3", "--seed", "0"]
    done = CliRunner().invoke(
        cli, [*args, "--budget", "40", "--results", str(tmp_path / "results")]
    )
    assert "stopped by the test" in done.output, done.output
    assert "--budget 40 s is not track 'demo-cpu-3''s 300 s" in done.output, done.output
    assert "will never be counted" in done.output


def test_the_track_budget_has_no_note() -> None:
    track = get_track(REPO / "results", "demo-cpu-3")
    assert budget_override_note(track, None) is None
    assert budget_override_note(track, track.budget_s) is None


def test_an_invalid_run_summary_shows_no_score(tmp_path: Path) -> None:
    run = RunResult.model_validate(run_dict("r0", status="invalid", passed=0))
    console = Console(record=True, width=200)
    print_result(run, tmp_path / "r0.json", console)
    text = console.export_text()
    assert text.startswith("invalid · score — · bpb —"), text
    assert "0.0%" not in text.splitlines()[0]
