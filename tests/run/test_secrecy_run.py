"""A whole run on the demo track whose promoted bundle is hostile: nothing of the hidden exam is
published, in the results folder (result JSON, agent.log, transcript, every artifact), on the
site built from it, or in what `toolkit runs verify` prints.

The hostile bundle (`tests/grading/hostile_bundle.py`) says back what it is shown, with a
canary: in the run's public scoring (feedback, public set) and in its final grading (the hidden
exam). Only the final grading's words are secret; the scan (`tests/leakscan.py`) looks for any
12 bytes of the hidden exam's prompts and answers (not for the canary: the public feedback has it).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.grading.grading_helpers import REPO, run_spec, submit_and_promote
from tests.grading.hostile_bundle import CANARY, hostile_source, secret_questions
from tests.leakscan import Secrets
from tests.site.site_fixture import build
from toolkit.cli import cli
from toolkit.grading import grade as grade_module
from toolkit.results.model import RunResult
from toolkit.run.orchestrate import execute_run
from toolkit.sandbox import SandboxError

pytestmark = pytest.mark.slow


def _exam(folder: Path) -> Path:
    folder.mkdir(parents=True)
    exam = folder / "exam.jsonl"
    exam.write_text(
        "".join(
            json.dumps(q, sort_keys=True, separators=(",", ":")) + "\n" for q in secret_questions(4)
        )
    )
    return exam


def _run(mode: str, tmp: Path) -> tuple[RunResult, Path, Secrets]:
    exam = _exam(tmp / "operator-exam")
    result = execute_run(run_spec(submit_and_promote(hostile_source(mode)), exam, tmp))
    return result, exam, Secrets.of_exam(exam)


@pytest.fixture(scope="module")
def extra_key_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunResult, Path, Path]:
    """The attack as found: a phase-1 reply with an extra key made of prompt text."""
    tmp = tmp_path_factory.mktemp("secrecy-extra-key")
    result, exam, _ = _run("extra_key", tmp)
    return result, exam, tmp / "results"


@pytest.fixture(scope="module")
def phase2_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunResult, Path, Path]:
    """Phase 2 raises with the teacher-forced contexts (the answers) in its message."""
    tmp = tmp_path_factory.mktemp("secrecy-phase2")
    result, exam, _ = _run("raise_logprobs", tmp)
    return result, exam, tmp / "results"


def test_a_hostile_promoted_bundle_leaks_nothing_into_the_results_folder(
    extra_key_run: tuple[RunResult, Path, Path], phase2_run: tuple[RunResult, Path, Path]
) -> None:
    for result, exam, results in (extra_key_run, phase2_run):
        secret = Secrets.of_exam(exam)
        assert secret.scan_tree(results) == []
        run_folder = results / result.track / result.run_id
        log = (run_folder / "agent.log").read_text()
        assert "Traceback" not in log
    # The public scoring during the run kept the bundle's words (the agent's feedback).
    public_error = extra_key_run[0].candidates[0].error or ""
    assert CANARY in public_error.replace(" ", ""), public_error
    result = extra_key_run[0]
    assert result.status == "failed"
    assert result.status_reason == (
        "the promoted candidate c001 failed grading: generate(): "
        "the worker broke the grading protocol"
    )
    result2 = phase2_run[0]
    assert result2.status == "valid" and result2.bits_per_byte is None


def test_the_site_built_from_those_results_leaks_nothing(
    extra_key_run: tuple[RunResult, Path, Path], tmp_path: Path
) -> None:
    result, exam, results = extra_key_run
    mine = Path(shutil.copytree(results, tmp_path / "results"))
    shutil.copy(REPO / "results" / "tracks.json", mine / "tracks.json")
    done = build(mine, tmp_path / "public")
    assert done.returncode == 0, done.stdout + done.stderr
    pages = list((tmp_path / "public").rglob("*.html"))
    assert any(result.run_id in p.read_text(errors="replace") for p in pages)
    secret = Secrets.of_exam(exam)
    assert secret.scan_tree(tmp_path / "public") == []
    assert secret.scan_text(done.stdout + done.stderr, "mkdocs output") == []


def _forge(results: Path, result: RunResult, tmp_path: Path, change: dict[str, object]) -> Path:
    """A copy of the results whose result file says `change` (a forged result to verify)."""
    mine = Path(shutil.copytree(results, tmp_path / "results"))
    result_file = mine / result.track / f"{result.run_id}.json"
    data = json.loads(result_file.read_text())
    data.update(change)
    result_file.write_text(json.dumps(data, indent=2))
    return result_file


def test_runs_verify_prints_no_secret_in_its_mismatch_lines(
    extra_key_run: tuple[RunResult, Path, Path],
    phase2_run: tuple[RunResult, Path, Path],
    tmp_path: Path,
) -> None:
    # The failed run, forged valid: the re-grade fails, and its reason is printed.
    result, exam, results = extra_key_run
    forged = _forge(results, result, tmp_path / "a", {"status": "valid", "status_reason": None})
    done = CliRunner().invoke(cli, ["runs", "verify", str(forged), "--exam", str(exam)])
    assert done.exit_code == 1, done.output
    assert "the re-grade fails: generate(): the worker broke the grading protocol" in done.output
    secret = Secrets.of_exam(exam)
    assert secret.scan_text(done.output, "runs verify") == []
    # The phase-2 run, forged with a bits per byte: the re-grade's bpb_reason is printed.
    result, exam, results = phase2_run
    forged = _forge(results, result, tmp_path / "b", {"bits_per_byte": 1.25})
    done = CliRunner().invoke(cli, ["runs", "verify", str(forged), "--exam", str(exam)])
    assert done.exit_code == 1, done.output
    assert "the bundle raised an error" in done.output
    secret = Secrets.of_exam(exam)
    assert secret.scan_text(done.output, "runs verify") == []


def test_a_harness_failure_in_the_final_grading_publishes_no_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A sandbox error whose message quotes the bundle, raised while a WorkerFailure holding
    # more of its words is handled, in the hidden grading only (public scoring runs as usual).
    exam = _exam(tmp_path / "operator-exam")
    prompt = json.loads(exam.read_text().splitlines()[0])["prompt"]
    real = grade_module._run_phase

    def failing(name: str, archive: Path, job: grade_module._Job, *rest: object) -> None:
        try:
            real(name, archive, job, *rest)  # type: ignore[arg-type]
        finally:
            if job.hidden:
                raise SandboxError(f"could not clean up after {CANARY}: {prompt}")

    monkeypatch.setattr(grade_module, "_run_phase", failing)
    agent = submit_and_promote(hostile_source("raise_generate"))
    result = execute_run(run_spec(agent, exam, tmp_path))
    assert result.status == "invalid"
    assert (result.status_reason or "").startswith("grading failed (infrastructure): GradingError")
    secret = Secrets.of_exam(exam)
    assert secret.scan_tree(tmp_path / "results") == []
    log = (tmp_path / "results" / result.track / result.run_id / "agent.log").read_text()
    assert "Traceback" not in log and "raised GradingError" in log
