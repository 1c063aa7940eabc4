"""The weights ablation in real gradings (sandboxed workers) and in a published run.

A bundle of string rules (tests/grading/bundles/rules: three demo-exam families, no model, a
dummy weights file) keeps its score under the ablation and is flagged; the same rules stored as
data in a JSON file collapse with the weights (a documented limit), as does a trained starter
model; a bundle that notices the ablation and fails says nothing that gets published.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from grading_helpers import (
    ORACLE,
    MakeBundle,
    MakeExam,
    TrainedStarter,
    code_questions,
    run_spec,
    submit_and_promote,
)

from exam_builder.build import build_exam
from exam_builder.exam_file import load_exam
from toolkit.cli import cli
from toolkit.grading import grade_bundle
from toolkit.grading.ablation import NOTE_DONE, NOTE_FAILED
from toolkit.grading.publish import coarse_ablation
from toolkit.results.model import load_run
from toolkit.run.orchestrate import execute_run

REPO = Path(__file__).resolve().parents[2]
RULES = Path(__file__).with_name("bundles") / "rules"
DEMO_BANK = REPO / "exam_builder" / "banks" / "public" / "demo"
# The built-in families as they were before they were made hard for rules (exam_builder 1.1.0,
# kept as plug-ins of a public test bank): the rule bundle reads three of them.
RULE_READABLE_BANK = REPO / "tests" / "exam_builder" / "banks" / "old_shapes"


@pytest.fixture(scope="module")
def demo_exam(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("exam") / "demo"
    build_exam(DEMO_BANK, folder, english_text=None)
    return folder / "exam.jsonl"


@pytest.fixture(scope="module")
def rule_exam(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("exam") / "old-shapes"
    build_exam(RULE_READABLE_BANK, folder, english_text=None)
    return folder / "exam.jsonl"


def _rule_bundle(tmp_path: Path, *, rules_as_data: bool = False) -> Path:
    bundle = Path(shutil.copytree(RULES, tmp_path / "rules"))
    np.save(bundle / "weights.npy", np.random.default_rng(0).normal(size=(64, 64)))
    if rules_as_data:
        source = (bundle / "inference.py").read_text()
        source = source.replace("RULES_FILE: str | None = None", 'RULES_FILE = "rules.json"')
        (bundle / "inference.py").write_text(source)
        keywords = {"reverse": "backwards", "sequence": "Sequence", "term": "Term"}
        (bundle / "rules.json").write_text(json.dumps(keywords))
    return bundle


@pytest.mark.usefixtures("grading_backend")
def test_a_rule_bundle_keeps_its_score_and_is_flagged(rule_exam: Path, tmp_path: Path) -> None:
    report = grade_bundle(_rule_bundle(tmp_path), rule_exam, phases=("generate",), ablation=True)
    assert report.ok and report.reason is None, report.reason
    assert report.score.passed >= 10  # records, lists, numeric: by rule
    assert report.ablation is not None and report.ablation.note == NOTE_DONE
    # kept whole, published in tenths of the exam (a hidden grading: toolkit/grading/publish.py)
    assert report.weights_ablation == coarse_ablation(report.score)
    assert report.model_free_suspect is True
    counts = report.ablation.counts
    assert (counts.python_kept, counts.tensor_files, counts.random_files) == (1, 1, 0)
    print(f"ablated pass: {report.ablation.seconds:.1f} s of {report.timings.total:.1f} s")


def test_rules_stored_as_data_collapse_with_the_weights(rule_exam: Path, tmp_path: Path) -> None:
    """The documented limit: rules kept in a non-Python file are destroyed like weights."""
    bundle = _rule_bundle(tmp_path, rules_as_data=True)
    report = grade_bundle(bundle, rule_exam, phases=("generate",), ablation=True)
    assert report.ok and report.score.passed >= 10
    assert report.ablation is not None and report.ablation.note == NOTE_FAILED
    assert report.weights_ablation is not None and report.weights_ablation.passed == 0
    assert report.model_free_suspect is False


SELF_CHECKING = """
import hashlib, sys
from pathlib import Path
import numpy as np

class Echo:
    def __init__(self, intact):
        self.intact = intact

    def generate(self, prompts, lengths):
        if not self.intact:  # it noticed the ablation: fail, quoting what it was asked
            sys.stderr.write(prompts[0].decode(errors="replace"))
            raise RuntimeError("ablated! " + prompts[0].decode(errors="replace"))
        out = []
        for prompt, n in zip(prompts, lengths):
            text = prompt.decode(errors="replace")
            found = text.split("code is ")
            guess = found[1].split(".")[0].encode() if len(found) > 2 else b""
            out.append((guess + b"?" * n)[:n])
        return out

    def next_byte_logprobs(self, contexts):
        return np.full((len(contexts), 256), -np.log(256.0), dtype=np.float32)

def load(bundle_dir, device):
    digest = hashlib.sha256((Path(bundle_dir) / "weights.bin").read_bytes()).hexdigest()
    return Echo(digest == EXPECTED)
"""


@pytest.mark.usefixtures("grading_backend")
def test_a_bundle_that_detects_the_ablation_fails_it_silently(
    tmp_path: Path, make_exam: object
) -> None:
    """Attack (and documented limit): a bundle hashes its own weights, sees the noise, and fails
    quoting the prompts. It dodges the flag; the grading stays valid and nothing it said in the
    ablated pass is in the report."""
    questions = code_questions(8)
    exam = make_exam(questions)  # type: ignore[operator]
    bundle = tmp_path / "self-checking"
    bundle.mkdir()
    weights = b"\x01" * 4096
    (bundle / "weights.bin").write_bytes(weights)
    expected = __import__("hashlib").sha256(weights).hexdigest()
    (bundle / "inference.py").write_text(f"EXPECTED = {expected!r}\n" + SELF_CHECKING)
    report = grade_bundle(bundle, exam, phases=("generate",), ablation=True)
    assert report.ok and report.reason is None, report.reason
    assert report.score.passed == 8
    assert report.ablation is not None and report.ablation.note == NOTE_FAILED
    assert report.weights_ablation is not None and report.weights_ablation.passed == 0
    assert report.model_free_suspect is False
    published = report.model_dump_json()
    assert "ablated!" not in published
    for q in load_exam(exam):
        assert q.prompt[-30:] not in published


def test_public_scoring_and_failed_gradings_skip_the_ablation(
    tmp_path: Path, make_exam: object
) -> None:
    exam = make_exam(code_questions(4))  # type: ignore[operator]
    bundle = tmp_path / "oracle"
    bundle.mkdir()
    (bundle / "inference.py").write_text(__import__("textwrap").dedent(ORACLE))
    plain = grade_bundle(bundle, exam, phases=("generate",))
    assert plain.ablation is None and plain.model_free_suspect is None
    (bundle / "inference.py").write_text("def load(bundle_dir, device):\n    raise SystemExit(3)\n")
    failed = grade_bundle(bundle, exam, phases=("generate",), ablation=True)
    assert not failed.ok
    assert failed.ablation is not None and failed.ablation.score is None
    assert failed.model_free_suspect is None


def test_a_published_run_carries_the_diagnostic(tmp_path: Path) -> None:
    """The final grading of a run runs the ablation; the result JSON records it."""
    exam_dir = tmp_path / "exam"
    exam_dir.mkdir()
    exam = exam_dir / "exam.jsonl"
    exam.write_text(
        "".join(
            json.dumps(q, sort_keys=True, separators=(",", ":")) + "\n" for q in code_questions(6)
        )
    )
    spec = run_spec(submit_and_promote(ORACLE), exam, tmp_path)
    result = execute_run(spec)
    assert result.status == "valid", result.status_reason
    assert result.score.passed == 6
    assert result.weights_ablation is not None and result.weights_ablation.passed == 6
    assert result.model_free_suspect is True
    assert result.config.protocol_revision == spec.track.protocol_revision  # the current one
    (path,) = (tmp_path / "results").glob("demo-cpu-3/*.json")
    stored = load_run(path)
    assert stored.model_free_suspect is True and stored.weights_ablation == result.weights_ablation
    log = (path.parent / result.artifacts["agent_log"]).read_text()
    # the published (coarse) count only: how the ablated pass went is not said
    assert "weights ablation: 6/6 (published coarsely), suspect True" in log
    assert NOTE_DONE not in log
    # the runs it scored while the agent worked were not ablated: only the final grading is
    assert all(c.public_score is not None for c in result.candidates)


@pytest.mark.slow
def test_a_trained_starter_model_is_not_flagged(trained_starter: TrainedStarter) -> None:
    """On the session's 24 questions (three a family): the ablation's verdict is per question,
    and a whole exam's two passes of phase 1 cost four times as much."""
    bundle = trained_starter.bundle
    report = grade_bundle(bundle, trained_starter.exam, phases=("generate",), ablation=True)
    assert report.ok, report.reason
    assert report.ablation is not None and report.ablation.counts.tensor_files == 1
    assert report.ablation.counts.tensors > 0  # weights.pt recognised: noise, not bytes
    assert report.weights_ablation is not None and report.weights_ablation.passed == 0
    assert report.model_free_suspect is False
    print(f"starter: real {report.score.passed}/24, ablated {report.weights_ablation.passed}")


def test_toolkit_grade_ablates_a_hidden_exam_by_default(
    make_bundle: MakeBundle, make_exam: MakeExam, demo_exam: Path, tmp_path: Path
) -> None:
    """On by default for an exam no track publishes; off for the demo track's public exam."""
    bundle = make_bundle(ORACLE)
    out = tmp_path / "report.json"
    args = ["grade", str(bundle), "--phase", "generate", "--json", str(out)]
    hidden = CliRunner().invoke(cli, [*args, "--exam", str(make_exam(code_questions(3)))])
    assert hidden.exit_code == 0, hidden.output
    assert "weights ablation: 3/3" in hidden.output and "MODEL-FREE SUSPECT" in hidden.output
    report = json.loads(out.read_text())
    assert report["model_free_suspect"] is True
    assert report["weights_ablation"] == {"percent": 100.0, "passed": 3, "total": 3}
    public = CliRunner().invoke(cli, [*args, "--exam", str(demo_exam)])
    assert public.exit_code == 0, public.output
    assert "weights ablation" not in public.output
    assert json.loads(out.read_text())["model_free_suspect"] is None
    forced = CliRunner().invoke(cli, [*args, "--exam", str(demo_exam), "--ablation"])
    assert forced.exit_code == 0 and "weights ablation: 0/100" in forced.output
