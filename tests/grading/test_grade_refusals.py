"""`toolkit grade` says what is wrong with its inputs in one line before any work, and never
prints a score it did not measure (issue 51 items 2 and 3)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from grading_helpers import ORACLE, MakeBundle, MakeExam, code_questions

from toolkit.cli import cli


def _one_line_refusal(args: list[str]) -> str:
    done = CliRunner().invoke(cli, ["grade", *args])
    assert done.exit_code == 2, done.output
    lines = done.output.strip().splitlines()
    assert len(lines) == 1, done.output  # no settings lines, no pydantic blocks, no usage
    assert "grading settings" not in done.output
    return lines[0]


def test_a_json_file_that_is_no_exam_is_one_line(make_bundle: MakeBundle, tmp_path: Path) -> None:
    not_exam = tmp_path / "runs.json"
    not_exam.write_text(json.dumps({"track": "demo-cpu-3", "score": 1}) + "\n")
    line = _one_line_refusal([str(make_bundle(ORACLE)), "--exam", str(not_exam)])
    assert "not a valid question" in line and "and 3 more" in line, line


def test_swapped_arguments_are_named(make_bundle: MakeBundle, make_exam: MakeExam) -> None:
    bundle, exam = make_bundle(ORACLE), make_exam(code_questions(2))
    line = _one_line_refusal([str(exam), "--exam", str(bundle)])
    assert "is an exam, not a bundle" in line and "swapped" in line, line
    line = _one_line_refusal([str(bundle), "--exam", str(bundle)])
    assert "is a bundle" in line and "swapped" in line, line


def test_phase_bpb_alone_says_the_score_was_not_measured(
    make_bundle: MakeBundle, make_exam: MakeExam, tmp_path: Path
) -> None:
    exam = make_exam(code_questions(2))
    out = tmp_path / "report.json"
    args = ["grade", str(make_bundle(ORACLE)), "--exam", str(exam), "--phase", "bpb"]
    done = CliRunner().invoke(cli, [*args, "--json", str(out)])
    assert done.exit_code == 0, done.output
    assert "Score: not measured" in done.output and "0.0%" not in done.output, done.output
    assert "Per family" not in done.output
    assert json.loads(out.read_text())["score_measured"] is False


def test_the_ablation_says_it_is_done(make_bundle: MakeBundle, make_exam: MakeExam) -> None:
    """Its load fails on noise for a model's weights: the step still ends with a line."""
    exam = make_exam(code_questions(2))
    args = ["grade", str(make_bundle(ORACLE)), "--exam", str(exam), "--phase", "generate"]
    done = CliRunner().invoke(cli, [*args, "--ablation"])
    assert done.exit_code == 0, done.output
    assert "ablation: load the bundle..." in done.output, done.output
    assert "ablation: done, ablated phase 1 completed" in done.output, done.output
