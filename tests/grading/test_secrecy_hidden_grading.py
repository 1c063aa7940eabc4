"""A hidden grading publishes no byte the bundle chose: every channel of a hostile bundle.

The hostile bundle (`hostile_bundle.py`) says back the prompts and contexts it was shown, with
a canary, through one channel per mode. Graded hidden (the default), the report, its JSON and
`toolkit grade`'s output hold failure categories only (leak scan: `tests/leakscan.py`), and
what the bundle said is in the operator log (mode 0600). Graded public (the path of a run's
public scoring, feedback to the agent), the same bundle's words do show: the control that the
scan and the channel are real.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner
from grading_helpers import MakeBundle, MakeExam
from hostile_bundle import (
    CANARY,
    MODES,
    PHASE1_MODES,
    PHASE2_MODES,
    hostile_source,
    secret_questions,
)

from exam_builder.exam_file import sha256_file
from tests.leakscan import Secrets
from toolkit.cli import cli
from toolkit.grading import grade_bundle, secret_log
from toolkit.grading.grade import GradingError, _run_phase
from toolkit.grading.publish import BPB_STEP, coarse_bpb
from toolkit.run.inputs import DEMO_BANK, built_exam
from toolkit.sandbox import SandboxError
from toolkit.tracks.model import GradingParams

# What the hidden report says for each mode: a fixed phrase of `publish.py`, without batch
# numbers or exit statuses (the bundle chooses those).
_PROTOCOL = "the worker broke the grading protocol"
CATEGORY = {
    "extra_key": f"generate(): {_PROTOCOL}",
    "raise_generate": "generate(): the bundle raised an error",
    "stderr_exit": "generate(): crashed: the worker died",
    "type_name": "some outputs were of the wrong length or type",
    "huge_reply": f"generate(): {_PROTOCOL}",
    "not_json": f"generate(): {_PROTOCOL}",
    "load_fail": "load(): the bundle raised an error",
    "load_stderr_exit": "load(): crashed: the worker died",
    "raise_logprobs": "not available: next_byte_logprobs(): the bundle raised an error",
    "extra_key_logprobs": f"not available: next_byte_logprobs(): {_PROTOCOL}",
    "logprobs_stderr_exit": "not available: next_byte_logprobs(): crashed: the worker died",
    "bad_logprobs": f"not available: next_byte_logprobs(): {_PROTOCOL}",
}


@pytest.fixture
def exam(make_exam: MakeExam) -> Path:
    return make_exam(secret_questions())


@pytest.fixture
def params(fast_params: GradingParams) -> GradingParams:
    return fast_params.model_copy(update={"batch_size": 8})


def _logged_for(exam: Path) -> list[dict[str, str]]:
    """The operator log's entries of the gradings of `exam` (the log is shared by every
    grading of this test process)."""
    sha = sha256_file(exam)
    entries = [json.loads(line) for line in secret_log.log_path().read_text().splitlines()]
    return [entry for entry in entries if entry.get("exam") == sha]


def _report_text(report: object) -> str:
    from toolkit.grading import GradeReport

    assert isinstance(report, GradeReport)
    return report.model_dump_json(indent=2)


@pytest.mark.parametrize("mode", MODES)
def test_a_hidden_grading_reports_categories_only(
    mode: str, make_bundle: MakeBundle, exam: Path, params: GradingParams
) -> None:
    bundle = make_bundle(hostile_source(mode, look_at=[str(exam)]))
    report = grade_bundle(bundle, exam, params=params)
    text = _report_text(report)
    secret = Secrets.of_exam(exam, canaries=[CANARY])
    assert secret.scan_text(text, "report") == [], text
    said = report.reason if mode in PHASE1_MODES else report.bpb_reason
    assert CATEGORY[mode] in (said or ""), text
    if mode in PHASE2_MODES:
        assert report.ok and report.bits_per_byte is None
    # What the bundle said is kept for the operator, in a private file: in this grading's own
    # entries (the log is shared by every grading of this test process, whose bundles all
    # carry the same canary).
    log = secret_log.log_path()
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert stat.S_IMODE(log.parent.stat().st_mode) == 0o700
    ours = _logged_for(exam)
    assert ours, "no entry of this grading in the operator log"
    # Not in the modes whose words are cut before they are read (huge_reply, not_json) or that
    # speak in a type's name or in numbers (type_name, bad_logprobs).
    if mode not in ("huge_reply", "not_json", "type_name", "bad_logprobs"):
        assert any(CANARY in entry["detail"] for entry in ours), (mode, ours)


@pytest.mark.usefixtures("grading_backend")
@pytest.mark.parametrize("mode", ["extra_key", "stderr_exit", "raise_logprobs"])
def test_each_backend_reports_categories_only(
    mode: str, make_bundle: MakeBundle, exam: Path, params: GradingParams
) -> None:
    # The same in a container: its exit status and stderr reach the host another way.
    report = grade_bundle(make_bundle(hostile_source(mode)), exam, params=params)
    text = _report_text(report)
    assert Secrets.of_exam(exam, canaries=[CANARY]).scan_text(text, "report") == [], text
    said = report.reason if mode in PHASE1_MODES else report.bpb_reason
    assert CATEGORY[mode] in (said or ""), text


@pytest.mark.parametrize(
    "mode", ["extra_key", "raise_generate", "stderr_exit", "load_fail", "raise_logprobs"]
)
def test_control_a_public_grading_shows_the_bundle_its_own_words(
    mode: str, make_bundle: MakeBundle, exam: Path, params: GradingParams
) -> None:
    # Public scoring keeps the bundle's text (the agent debugs with it): the scan finds it
    # there, so it would find it in a hidden report too.
    bundle = make_bundle(hostile_source(mode, look_at=[str(exam)]))
    report = grade_bundle(bundle, exam, params=params, hidden=False)
    leaks = Secrets.of_exam(exam, canaries=[CANARY]).scan_text(_report_text(report))
    assert leaks, _report_text(report)


def test_a_hidden_grading_publishes_bits_per_byte_coarsely(
    make_bundle: MakeBundle, exam: Path, params: GradingParams
) -> None:
    source = """
        import numpy as np
        class M:
            def generate(self, prompts, lengths):
                return [b" " * n for n in lengths]
            def next_byte_logprobs(self, contexts):
                # a distribution that depends on the context: many bits in the float
                rows = np.zeros((len(contexts), 256))
                for i, c in enumerate(contexts):
                    rows[i, :] = [(c[-1] * 7 + b) % 13 for b in range(256)]
                rows -= np.log(np.exp(rows).sum(axis=1, keepdims=True))
                return rows.astype(np.float32)
        def load(bundle_dir, device):
            return M()
    """
    bundle = make_bundle(source)
    hidden = grade_bundle(bundle, exam, params=params)
    public = grade_bundle(bundle, exam, params=params, hidden=False)
    assert hidden.bits_per_byte is not None and public.bits_per_byte is not None
    assert hidden.bits_per_byte == coarse_bpb(public.bits_per_byte)
    assert hidden.bits_per_byte % BPB_STEP == 0 and public.bits_per_byte % BPB_STEP != 0


def test_a_harness_failure_in_a_hidden_grading_is_not_chained_to_the_bundle(
    make_bundle: MakeBundle, exam: Path, params: GradingParams, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A sandbox that fails with the bundle's words in its message, while a WorkerFailure
    # holding more of them is being handled (so that it would be chained).
    prompts = [json.loads(line)["prompt"] for line in exam.read_text().splitlines()]

    def failing(name: str, *args: object, **kwargs: object) -> None:
        try:
            _run_phase(name, *args, **kwargs)  # type: ignore[arg-type]
        finally:
            raise SandboxError(f"cleanup failed under {CANARY} {prompts[0]}")

    monkeypatch.setattr("toolkit.grading.grade._run_phase", failing)
    bundle = make_bundle(hostile_source("raise_generate"))
    log = secret_log.log_path()
    before = log.stat().st_size if log.exists() else 0  # the log is every test's: read ours
    with pytest.raises(GradingError) as caught:
        grade_bundle(bundle, exam, params=params)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    import traceback

    shown = "".join(traceback.format_exception(caught.value))
    assert Secrets.of_exam(exam, canaries=[CANARY]).scan_text(shown) == [], shown
    assert "SandboxError" in str(caught.value)
    with log.open("rb") as f:
        f.seek(before)
        ours = f.read().decode("utf-8", "replace")
    assert CANARY in ours and "SandboxError" in ours  # the operator has the traceback


@pytest.mark.parametrize("mode", ["extra_key", "raise_logprobs", "stderr_exit"])
def test_toolkit_grade_of_a_hidden_exam_prints_no_secret(
    mode: str, make_bundle: MakeBundle, exam: Path, tmp_path: Path
) -> None:
    bundle = make_bundle(hostile_source(mode))
    out = tmp_path / "report.json"
    args = ["grade", str(bundle), "--exam", str(exam), "--json", str(out), "--graded-ok"]
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 0, done.output
    assert "hidden exam" in done.output
    secret = Secrets.of_exam(exam, canaries=[CANARY])
    assert secret.scan_text(done.output, "output") == [], done.output
    assert secret.scan_bytes(out.read_bytes(), "report.json") == []
    report = json.loads(out.read_text())
    said = report["bpb_reason"] if mode == "raise_logprobs" else report["reason"]
    assert CATEGORY[mode] in said
    # --public: the operator asked to see the bundle's words.
    out2 = tmp_path / "public.json"
    shown = CliRunner().invoke(
        cli,
        ["grade", str(bundle), "--exam", str(exam), "--json", str(out2), "--public", "--graded-ok"],
    )
    assert shown.exit_code == 0, shown.output
    assert secret.scan_bytes(out2.read_bytes(), "public.json") != []


def test_toolkit_grade_treats_the_demo_exam_as_public(
    make_bundle: MakeBundle, tmp_path: Path
) -> None:
    exam = built_exam(DEMO_BANK, "demo")
    bundle = make_bundle(hostile_source("raise_generate"))
    done = CliRunner().invoke(
        cli, ["grade", str(bundle), "--exam", str(exam), "--phase", "generate", "--graded-ok"]
    )
    assert done.exit_code == 0, done.output
    assert "public exam (the exam of the demo track 'demo-cpu-3')" in done.output
    assert CANARY in done.output.replace("\n", "")


def test_the_operator_log_is_outside_every_results_folder(tmp_path: Path) -> None:
    log = secret_log.log_path()
    home = Path(os.environ["ARI_HOME"]).resolve()
    assert log.is_relative_to(home / "operator")


LONG_STDERR = """
    import os, sys
    class M:
        def generate(self, prompts, lengths):
            sys.stderr.write("EARLY " + "x" * 3000 + " MIDDLE " + "y" * 1000 + " LAST\\n")
            sys.stderr.flush()
            os._exit(3)
    def load(bundle_dir, device):
        return M()
"""
RAISES_DEEP = """
    def deep_frame_of_the_bundle():
        raise RuntimeError("the reason")
    class M:
        def generate(self, prompts, lengths):
            deep_frame_of_the_bundle()
    def load(bundle_dir, device):
        return M()
"""


@pytest.mark.parametrize(
    ("source", "public_word", "logged_word"),
    [(LONG_STDERR, "LAST", "MIDDLE"), (RAISES_DEEP, "the reason", "deep_frame_of_the_bundle")],
    ids=["stderr", "traceback"],
)
def test_the_operator_log_gets_more_of_the_bundles_words_than_public_scoring(
    source: str,
    public_word: str,
    logged_word: str,
    make_bundle: MakeBundle,
    exam: Path,
    params: GradingParams,
) -> None:
    # Public scoring shows the agent a short reason (kept in its run's history and result); a
    # hidden grading gives the operator log more of the same words: the whole kept stderr tail
    # (2,000 bytes), the traceback's last lines.
    bundle = make_bundle(source)
    public = grade_bundle(bundle, exam, params=params, hidden=False)
    assert public.reason and public_word in public.reason, public.reason
    assert logged_word not in public.reason and len(public.reason) < 400, public.reason
    hidden = grade_bundle(bundle, exam, params=params)
    assert hidden.reason and public_word not in hidden.reason, hidden.reason
    ours = _logged_for(exam)
    assert any(logged_word in e["detail"] and public_word in e["detail"] for e in ours), ours
    assert not any("EARLY" in e["detail"] for e in ours)  # past the kept tail
