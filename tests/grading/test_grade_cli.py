"""`toolkit grade`: prints the summary, writes JSON, exits 0 for any graded bundle."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from grading_helpers import ORACLE, MakeBundle, MakeExam, code_questions

from toolkit.cli import cli


def test_grade_prints_the_report_and_writes_json(
    make_bundle: MakeBundle, make_exam: MakeExam, tmp_path: Path
) -> None:
    exam = make_exam(code_questions(3))
    out = tmp_path / "report.json"
    result = CliRunner().invoke(
        cli, ["grade", str(make_bundle(ORACLE)), "--exam", str(exam.parent), "--json", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "Score: 100.0% (3/3 exact)" in result.output
    assert "bits per byte on the answer spans: 8.0000" in result.output
    report = json.loads(out.read_text())
    assert report["score"]["passed"] == 3 and len(report["sha256"]) == 64
    assert report["passed_ids"] == [q["id"] for q in code_questions(3)]


def test_keep_leaves_the_sandboxes_for_inspection(
    make_bundle: MakeBundle, make_exam: MakeExam, tmp_path: Path
) -> None:
    keep = tmp_path / "keep"
    args = ["grade", str(make_bundle(ORACLE)), "--exam", str(make_exam(code_questions(1)))]
    result = CliRunner().invoke(cli, [*args, "--keep", str(keep)])
    assert result.exit_code == 0, result.output
    assert (keep / "bundle.tar.gz").is_file()
    assert (keep / "phase1" / "bundle" / "inference.py").is_file()
    assert (keep / "phase2" / "worker.py").is_file()
    again = CliRunner().invoke(cli, [*args, "--keep", str(keep)])
    assert again.exit_code == 2 and "not empty" in again.output


def test_a_failing_bundle_is_graded_with_exit_code_0(
    make_bundle: MakeBundle, make_exam: MakeExam
) -> None:
    bundle = make_bundle("raise SystemExit('nope')\n")
    result = CliRunner().invoke(
        cli, ["grade", str(bundle), "--exam", str(make_exam([*code_questions(1)]))]
    )
    assert result.exit_code == 0, result.output
    assert "Score: 0.0%" in result.output and "failed to load" in result.output


def test_usage_errors_exit_2(make_bundle: MakeBundle, tmp_path: Path) -> None:
    bundle = make_bundle(ORACLE)
    missing = CliRunner().invoke(cli, ["grade", str(bundle), "--exam", str(tmp_path / "none")])
    assert missing.exit_code == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    result = CliRunner().invoke(cli, ["grade", str(bundle), "--exam", str(bad)])
    assert result.exit_code == 2 and "not a valid question" in result.output
    result = CliRunner().invoke(cli, ["grade", str(tmp_path / "nobundle"), "--exam", str(bad)])
    assert result.exit_code == 2


def test_help_ends_with_an_example() -> None:
    result = CliRunner().invoke(cli, ["grade", "--help"])
    assert result.exit_code == 0 and "Example:" in result.output
    assert "toolkit grade bundles/b1 --exam" in result.output
