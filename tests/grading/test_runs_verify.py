"""`toolkit runs verify`: a published result is checked against its artifacts and a re-grade.

One short run (a test agent submits and promotes the oracle bundle, which passes 3 of the 6
questions of a small exam) is published once; each test edits a copy of its results folder the
way someone forging a result would, and `runs verify` (and, for the logs, `runs validate`)
must catch it.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from grading_helpers import ORACLE, code_questions, run_spec, submit_and_promote

from toolkit.cli import cli
from toolkit.results.chain import GENESIS, line_hash
from toolkit.run.orchestrate import execute_run


def _exam(folder: Path) -> Path:
    """Three questions the oracle bundle answers (extraction) and three it cannot (records)."""
    unsolvable = [
        {"id": f"records-{i}", "family": "records", "prompt": f"Row {i}: ", "answer": "ZZZ"}
        for i in range(3)
    ]
    folder.mkdir()
    exam = folder / "exam.jsonl"
    exam.write_text(
        "".join(
            json.dumps(q, sort_keys=True, separators=(",", ":")) + "\n"
            for q in code_questions(3) + unsolvable
        )
    )
    return exam


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(results folder, result file) of one published run, and its exam."""
    tmp = tmp_path_factory.mktemp("verify-run")
    exam = _exam(tmp / "exam")
    result = execute_run(run_spec(submit_and_promote(ORACLE), exam, tmp))
    assert result.status == "valid", result.status_reason
    assert result.score.passed == 3 and result.bits_per_byte is not None
    assert set(result.logs) == {"audit", "history"}, result.logs
    return tmp / "results", exam


@pytest.fixture
def copy(published: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the published results to edit: (result file, exam)."""
    results, exam = published
    mine = Path(shutil.copytree(results, tmp_path / "results"))
    (result_file,) = mine.glob("demo-cpu-3/*.json")
    return result_file, exam


def _verify(result_file: Path, exam: Path) -> tuple[int, list[str]]:
    done = CliRunner().invoke(cli, ["runs", "verify", str(result_file), "--exam", str(exam)])
    return done.exit_code, [line for line in done.output.splitlines() if line.strip()]


def _edit(result_file: Path, change: dict[str, object]) -> None:
    data = json.loads(result_file.read_text())
    for path, value in change.items():
        *parents, last = path.split(".")
        target = data
        for key in parents:
            target = target[key]
        target[last] = value
    result_file.write_text(json.dumps(data, indent=2))


def test_an_untouched_result_verifies(copy: tuple[Path, Path]) -> None:
    code, lines = _verify(*copy)
    assert code == 0, lines
    assert lines[-1].startswith("ok: ") and "re-graded c001: 3/6" in lines[-1]


def test_a_changed_score_is_caught(copy: tuple[Path, Path]) -> None:
    result_file, exam = copy
    # Forged consistently: the families add up to the new score (the model checks that).
    _edit(result_file, {"score.passed": 5, "score.percent": 500 / 6, "families.records.passed": 2})
    code, lines = _verify(result_file, exam)
    assert code == 1, lines
    assert "mismatch: score: the result says 5/6 (83.3%), the re-grade gives 3/6 (50.0%)" in lines
    assert "mismatch: family records: the result says 2/3, the re-grade gives 0/3" in lines


def test_a_changed_family_count_is_caught(copy: tuple[Path, Path]) -> None:
    result_file, exam = copy
    # The same score, its passes moved to another family.
    _edit(result_file, {"families.records.passed": 1, "families.extraction.passed": 2})
    code, lines = _verify(result_file, exam)
    assert code == 1, lines
    # (the edit also breaks the harness's signature: tests/grading/test_signing_verify.py)
    assert [x for x in lines if x.startswith("mismatch:") and "signature" not in x] == [
        "mismatch: family extraction: the result says 2/3, the re-grade gives 3/3",
        "mismatch: family records: the result says 1/3, the re-grade gives 0/3",
    ]


def test_a_changed_bits_per_byte_is_caught(copy: tuple[Path, Path]) -> None:
    result_file, exam = copy
    _edit(result_file, {"bits_per_byte": 1.5})
    code, lines = _verify(result_file, exam)
    assert code == 1 and any(x.startswith("mismatch: bits per byte") for x in lines), lines


def test_a_swapped_archive_is_caught(copy: tuple[Path, Path], tmp_path: Path) -> None:
    result_file, exam = copy
    archive = result_file.parent / result_file.stem / "candidates" / "c001.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:  # a better bundle, put in its place
        data = b"def load(bundle_dir, device):\n    raise SystemExit\n"
        info = tarfile.TarInfo("inference.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    code, lines = _verify(result_file, exam)
    assert code == 1 and any("the stored archive was swapped" in x for x in lines), lines


def test_another_exam_is_caught(copy: tuple[Path, Path], tmp_path: Path) -> None:
    result_file, exam = copy
    other = tmp_path / "other.jsonl"  # the exam less its last question
    other.write_bytes(b"".join(exam.read_bytes().splitlines(keepends=True)[:-1]))
    code, lines = _verify(result_file, other)
    assert code == 1 and any(x.startswith("mismatch: exam:") for x in lines), lines


def _rewrite_chain(path: Path, keep: int) -> None:
    """Keep the first `keep` entries and recompute every hash: a valid chain again."""
    prev, out = GENESIS, []
    for n, line in enumerate(path.read_bytes().splitlines()[:keep], 1):
        entry = json.loads(line)
        entry.update(seq=n, prev=prev)
        text = (json.dumps(entry, sort_keys=True, ensure_ascii=False) + "\n").encode()
        out.append(text)
        prev = line_hash(text)
    path.write_bytes(b"".join(out))


def test_an_audit_log_rewritten_with_fresh_hashes_is_caught(copy: tuple[Path, Path]) -> None:
    result_file, exam = copy
    audit = result_file.parent / result_file.stem / "audit.jsonl"
    entries = len(audit.read_bytes().splitlines())
    assert entries >= 2
    before = hashlib.sha256(audit.read_bytes()).hexdigest()
    _rewrite_chain(audit, entries - 1)  # the promote call, gone without a trace in the chain
    assert hashlib.sha256(audit.read_bytes()).hexdigest() != before
    code, lines = _verify(result_file, exam)
    assert code == 1 and any("audit log" in x and "rewritten" in x for x in lines), lines
    done = CliRunner().invoke(cli, ["runs", "validate", str(result_file)])
    assert done.exit_code == 1 and "rewritten" in done.output, done.output


def test_verify_has_help_with_an_example() -> None:
    done = CliRunner().invoke(cli, ["runs", "verify", "--help"])
    assert done.exit_code == 0 and "Example:" in done.output
