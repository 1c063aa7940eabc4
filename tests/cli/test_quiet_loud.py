"""Quiet where it should be, loud where it should be (issue 51 item 5): piped `doctor` folds
its table to 100 columns, and an unknown track is one line and exit status 2 in every
command that takes one."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from toolkit.cli import cli

REPO = Path(__file__).resolve().parents[2]
RESULTS = ["--results", str(REPO / "results")]


def test_piped_doctor_fits_in_100_columns() -> None:
    done = CliRunner().invoke(cli, ["doctor", *RESULTS])
    assert done.exit_code in (0, 1), done.output
    widest = max(len(line) for line in done.output.splitlines())
    assert widest <= 100, done.output
    assert "toolkit doctor · track demo-cpu-3" in done.output


@pytest.mark.parametrize(
    "args",
    [["tracks", "show", "nope"], ["doctor", "--track", "nope"]],
    ids=["tracks show", "doctor"],
)
def test_an_unknown_track_is_one_line_and_exit_2(args: list[str]) -> None:
    done = CliRunner().invoke(cli, [*args, *RESULTS])
    assert done.exit_code == 2, done.output
    assert done.output.strip().splitlines() == [
        f"Error: unknown track 'nope' in {REPO / 'results'}/tracks.json (known there: demo-cpu, "
        "demo-cpu-2, demo-cpu-3, v1-h100-1h); see `toolkit tracks list`, or pass --registry "
        "with the folder that registers it"
    ], done.output
