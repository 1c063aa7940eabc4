"""A result file is bound to its run: `runs verify` re-grades every promoted archive, whatever
the file's status says, and checks the harness's signature; `runs validate` checks the latter.

One short run (the oracle bundle passes 3 of 6 questions) is published once, signed by the
harness; each test edits a copy of its results folder the way a forger would.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from grading_helpers import ORACLE, code_questions, run_spec, submit_and_promote

from toolkit.cli import cli
from toolkit.results import signing
from toolkit.results.model import load_run, save_run
from toolkit.run.orchestrate import execute_run


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(results folder, exam) of one run published by the harness."""
    tmp = tmp_path_factory.mktemp("signed-run")
    folder = tmp / "exam"
    folder.mkdir()
    unsolvable = [
        {"id": f"records-{i}", "family": "records", "prompt": f"Row {i}: ", "answer": "ZZZ"}
        for i in range(3)
    ]
    exam = folder / "exam.jsonl"
    exam.write_text(
        "".join(
            json.dumps(q, sort_keys=True, separators=(",", ":")) + "\n"
            for q in code_questions(3) + unsolvable
        )
    )
    result = execute_run(run_spec(submit_and_promote(ORACLE), exam, tmp))
    assert result.status == "valid" and result.score.passed == 3, result.status_reason
    assert result.signature is not None
    return tmp / "results", exam


@pytest.fixture
def copy(published: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the published results folder to edit: (result file, exam)."""
    results, exam = published
    mine = Path(shutil.copytree(results, tmp_path / "results"))
    (result_file,) = mine.glob("demo-cpu-3/*.json")
    return result_file, exam


def _verify(result_file: Path, exam: Path) -> tuple[int, list[str]]:
    done = CliRunner().invoke(cli, ["runs", "verify", str(result_file), "--exam", str(exam)])
    return done.exit_code, [line for line in done.output.splitlines() if line.strip()]


def _validate(path: Path) -> tuple[int, str]:
    done = CliRunner().invoke(cli, ["runs", "validate", str(path)])
    return done.exit_code, done.output


def _edit(result_file: Path, **change: object) -> None:
    data = json.loads(result_file.read_text())
    data.update(change)
    result_file.write_text(json.dumps(data, indent=2))


def test_the_harness_signed_the_result_and_listed_its_key(copy: tuple[Path, Path]) -> None:
    result_file, exam = copy
    keyring = signing.load_keyring(result_file.parent.parent / signing.KEYRING_FILE)
    signature = load_run(result_file).signature
    assert signature is not None and [k.id for k in keyring.keys] == [signature.key_id]
    code, lines = _verify(result_file, exam)
    assert code == 0, lines
    assert "re-graded c001: 3/6" in lines[-1] and "signature holds" in lines[-1]
    assert _validate(result_file)[0] == 0


def test_a_valid_result_edited_to_invalid_is_caught_twice(copy: tuple[Path, Path]) -> None:
    """The attack that passed before: `status: invalid` hid a promoted archive from verify."""
    result_file, exam = copy
    _edit(result_file, status="invalid", status_reason="infrastructure error (forged)")
    code, lines = _verify(result_file, exam)
    assert code == 1, lines
    assert any(x.startswith("mismatch: signature: the signature") for x in lines), lines
    assert (
        "mismatch: status: the result says invalid, but its promoted archive grades as a "
        "valid run: 3/6 (50.0%)" in lines
    ), lines
    code, output = _validate(result_file)
    assert code == 1 and f"{result_file}: signature:" in output, output


def test_a_valid_result_edited_to_failed_is_caught(copy: tuple[Path, Path]) -> None:
    result_file, exam = copy
    _edit(
        result_file,
        status="failed",
        status_reason="forged",
        score={"percent": 0.0, "passed": 0, "total": 6},
        families={},
    )
    code, lines = _verify(result_file, exam)
    assert code == 1, lines
    assert (
        "mismatch: status: the result says failed, but its promoted archive grades as a "
        "valid run: 3/6 (50.0%)" in lines
    ), lines
    assert any(x.startswith("mismatch: signature:") for x in lines), lines


def test_an_invalid_status_signed_by_a_listed_key_is_still_re_graded(
    copy: tuple[Path, Path],
) -> None:
    """Even a file whose signature holds is re-graded when it says invalid: the status is
    checked against the archive, not taken from the file."""
    result_file, exam = copy
    result = load_run(result_file)
    result.status, result.status_reason = "invalid", "infrastructure error"
    save_run(result, result_file.parent.parent)
    signing.trust(result_file.parent.parent, signing.local_public())
    code, lines = _verify(result_file, exam)
    assert code == 1, lines
    assert not any(x.startswith("mismatch: signature") for x in lines), lines
    assert any("the result says invalid, but its promoted archive grades" in x for x in lines)


@pytest.mark.parametrize(
    "change",
    [
        {"model": "gpt-9"},
        {"effort": "high"},
        {"agent": "opencode"},
        {"agent_version": "9.9.9"},
        {"provider": "openai"},
        {"seed": 7},
        {"score": {"percent": 500 / 6, "passed": 5, "total": 6}},
    ],
    ids=["model", "effort", "agent", "agent_version", "provider", "seed", "score"],
)
def test_an_edited_identity_or_score_fails_the_signature(
    copy: tuple[Path, Path], change: dict[str, object]
) -> None:
    result_file, _ = copy
    data = json.loads(result_file.read_text())
    data.update(change)
    if "score" in change:  # a consistent forgery: the families add up to the new score
        data["families"]["records"]["passed"] = 2
    result_file.write_text(json.dumps(data, indent=2))
    code, output = _validate(result_file)
    assert code == 1, output
    assert f"{result_file}: signature: the signature" in output, output
    assert "does not match the content" in output


def test_verify_catches_an_identity_edit_that_a_re_grade_cannot_see(
    copy: tuple[Path, Path],
) -> None:
    result_file, exam = copy
    _edit(result_file, model="a-better-model")
    code, lines = _verify(result_file, exam)
    assert code == 1, lines
    mismatches = [x for x in lines if x.startswith("mismatch:")]
    assert len(mismatches) == 1 and mismatches[0].startswith("mismatch: signature:"), lines
