"""`toolkit grade`: prints the summary, writes JSON, exits 0 for any graded bundle."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from grading_helpers import ORACLE, MakeBundle, MakeExam, code_questions

from exam_builder.exam_file import sha256_file
from toolkit.cli import cli
from toolkit.grading.grade import host_memory_bytes
from toolkit.sandbox.local import host as local_host


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


def test_cpus_puts_each_grading_worker_under_a_cpu_quota(
    make_bundle: MakeBundle, make_exam: MakeExam, tmp_path: Path
) -> None:
    exam = make_exam(code_questions(2))
    out = tmp_path / "report.json"
    args = ["grade", str(make_bundle(ORACLE)), "--exam", str(exam), "--json", str(out)]
    result = CliRunner().invoke(cli, [*args, "--cpus", "0.5"])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["score"]["passed"] == 2
    quota = "cgroup-cpu" if local_host.probe().cpu_parent is not None else "cpu-quota"
    assert quota in report["isolation"] + report["not_isolated"]
    assert "cpu-share" not in report["not_isolated"]
    too_many = CliRunner().invoke(cli, [*args, "--cpus", "100000"])
    assert too_many.exit_code == 2 and "this host has" in too_many.output


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


def test_a_failing_bundle_is_graded_and_exits_3(
    make_bundle: MakeBundle, make_exam: MakeExam
) -> None:
    """A bundle that cannot load is graded (score 0, the reason first) but the command fails:
    a script must not read it as a grading that went well (issue 29)."""
    bundle = make_bundle("raise SystemExit('nope')\n")
    exam = make_exam([*code_questions(1)])
    result = CliRunner().invoke(cli, ["grade", str(bundle), "--exam", str(exam)])
    assert result.exit_code == 3, result.output
    assert "exit status 3 (--graded-ok" in result.output
    assert "Score: 0.0%" in result.output
    assert "load(): the bundle raised an error" in result.output
    first = result.output.index("the bundle failed: load()")
    assert first < result.output.index("Score: 0.0%")  # the reason first, then the zeros
    strict = CliRunner().invoke(cli, ["grade", str(bundle), "--exam", str(exam), "--fail-on-error"])
    assert strict.exit_code == 3, strict.output
    lenient = CliRunner().invoke(cli, ["grade", str(bundle), "--exam", str(exam), "--graded-ok"])
    assert lenient.exit_code == 0, lenient.output


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


SLOW_LOAD = "import time\ndef load(bundle_dir, device):\n    time.sleep(30)\n"


def _track(track_id: str, exam_sha256: str, *, demo: bool, **grading: float) -> dict[str, object]:
    return {
        "id": track_id,
        "title": track_id,
        "benchmark_version": "1.0",
        "exam_sha256": exam_sha256,
        "exam_questions": 1,
        "budget_s": 60,
        "per_call_limit_s": 30,
        "reserved_s": 5,
        "size_limit_bytes": 16_000_000,
        "grading": grading,
        "hardware": "cpu",
        "demo": demo,
    }


def _registry(tmp_path: Path, tracks: list[dict[str, object]]) -> Path:
    folder = tmp_path / "registry"
    folder.mkdir(exist_ok=True)
    (folder / "tracks.json").write_text(json.dumps(tracks))
    return folder


def _grade(bundle: Path, exam: Path, out: Path, *args: str) -> tuple[str, dict[str, object]]:
    result = CliRunner().invoke(
        cli, ["grade", str(bundle), "--exam", str(exam), "--json", str(out), "--graded-ok", *args]
    )
    assert result.exit_code == 0, result.output
    return result.output, json.loads(out.read_text())


def test_grade_takes_the_settings_of_the_track_of_its_exam(
    make_bundle: MakeBundle, make_exam: MakeExam, tmp_path: Path
) -> None:
    exam = make_exam(code_questions(1))
    sha = sha256_file(exam)
    registry = _registry(
        tmp_path,
        [
            _track("official", "0" * 64, demo=False, load_timeout_s=3),
            _track("mine", sha, demo=True, load_timeout_s=1),
            _track("other", "1" * 64, demo=True, load_timeout_s=2),
        ],
    )
    bundle = make_bundle(SLOW_LOAD)
    reg = ["--registry", str(registry)]
    output, report = _grade(bundle, exam, tmp_path / "a.json", *reg)
    assert "track 'mine' (its exam hash matches this exam)" in output
    assert "within 1 s" in str(report["reason"])
    output, report = _grade(bundle, exam, tmp_path / "b.json", *reg, "--track", "other")
    assert "track 'other' (--track) (its exam hash is not this exam's)" in output
    assert "within 2 s" in str(report["reason"])
    # No track has this exam: the official track's settings.
    registry = _registry(tmp_path, [_track("official", "0" * 64, demo=False, load_timeout_s=3)])
    output, report = _grade(bundle, exam, tmp_path / "c.json", "--registry", str(registry))
    assert "track 'official' (the official track" in output
    # A hidden grading's reason has no number in it (publish.py): the limit shows in the time.
    assert report["reason"] == "load(): ran past its time limit"
    assert 3 <= report["timings"]["load"] < 30
    unknown = CliRunner().invoke(
        cli, ["grade", str(bundle), "--exam", str(exam), *reg, "--track", "nope"]
    )
    assert unknown.exit_code == 2 and "unknown track 'nope'" in unknown.output


def test_a_memory_cap_above_the_host_is_lowered_and_said_so(
    make_bundle: MakeBundle, make_exam: MakeExam, tmp_path: Path
) -> None:
    exam = make_exam(code_questions(1))
    huge = 2**50  # a petabyte: more than any host
    registry = _registry(tmp_path, [_track("t", sha256_file(exam), demo=False, memory_bytes=huge)])
    output, report = _grade(
        make_bundle(ORACLE), exam, tmp_path / "r.json", "--registry", str(registry)
    )
    line = f"lowered from {huge / 2**30:.1f} GiB to this host's {host_memory_bytes() / 2**30:.1f}"
    assert f"note: memory cap {line}" in output.replace("\n", " ")
    assert report["notes"] and line in str(report["notes"])
    assert report["score"] == {"percent": 100.0, "passed": 1, "total": 1}
