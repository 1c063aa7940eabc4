"""Attack: a key holder turns a `failed` run into `invalid` (a free rerun) (issue 27, item 3).

Before, `runs verify` took a failing re-grade to match `invalid`. Now an invalid status must
carry its evidence (the check that failed, signed with the result), and evidence that blames
the grading is repeated: the harness's reference bundle is graded where verify runs.

One short run is published whose promoted bundle fails to load (a `failed` run); each test
re-signs an edited copy with this machine's key, the one a key holder would use.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from grading_helpers import code_questions, run_spec, submit_and_promote

from toolkit.cli import cli
from toolkit.results.model import InvalidEvidence, load_run, save_run
from toolkit.run.orchestrate import execute_run

BROKEN = """
def load(bundle_dir, device):
    raise RuntimeError("this bundle does not load")
"""


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(results folder, exam) of one failed run published by the harness."""
    tmp = tmp_path_factory.mktemp("failed-run")
    folder = tmp / "exam"
    folder.mkdir()
    exam = folder / "exam.jsonl"
    exam.write_text(
        "".join(
            json.dumps(q, sort_keys=True, separators=(",", ":")) + "\n" for q in code_questions(4)
        )
    )
    result = execute_run(run_spec(submit_and_promote(BROKEN), exam, tmp))
    assert result.status == "failed" and result.promoted is not None, result.status_reason
    assert result.evidence is None
    return tmp / "results", exam


@pytest.fixture
def copy(published: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    results, exam = published
    mine = Path(shutil.copytree(results, tmp_path / "results"))
    (result_file,) = mine.glob("demo-cpu-3/*.json")
    return result_file, exam


def _verify(result_file: Path, exam: Path) -> tuple[int, list[str]]:
    done = CliRunner().invoke(cli, ["runs", "verify", str(result_file), "--exam", str(exam)])
    return done.exit_code, [line for line in done.output.splitlines() if line.strip()]


def _resign_as_invalid(result_file: Path, evidence: InvalidEvidence | None) -> None:
    result = load_run(result_file)
    result.status, result.status_reason = "invalid", "grading failed (infrastructure)"
    result.evidence = evidence
    save_run(result, result_file.parent.parent)  # signed with a trusted key: the key holder's


def test_the_failed_run_verifies_as_it_is(copy: tuple[Path, Path]) -> None:
    code, lines = _verify(*copy)
    assert code == 0, lines


def test_invalid_without_evidence_fails_verify(copy: tuple[Path, Path]) -> None:
    result_file, exam = copy
    _resign_as_invalid(result_file, None)
    code, lines = _verify(result_file, exam)
    assert code == 1, lines
    assert not any(x.startswith("mismatch: signature") for x in lines), lines
    assert any("invalid but carries no evidence" in x for x in lines), lines


def test_invalid_blaming_the_grading_is_repeated_and_refuted(copy: tuple[Path, Path]) -> None:
    result_file, exam = copy
    forged = InvalidEvidence(check="grading-reference", detail="the reference bundle failed too")
    _resign_as_invalid(result_file, forged)
    code, lines = _verify(result_file, exam)
    assert code == 1, lines
    assert any("here the reference bundle grades" in x and "not invalid" in x for x in lines)


def test_evidence_on_a_run_that_is_not_invalid_is_refused(copy: tuple[Path, Path]) -> None:
    result_file, _ = copy
    data = json.loads(result_file.read_text())
    data["evidence"] = {"check": "provider", "detail": "x"}
    result_file.write_text(json.dumps(data))
    done = CliRunner().invoke(cli, ["runs", "validate", str(result_file)])
    assert done.exit_code == 1 and "carries no evidence of invalidity" in done.output
