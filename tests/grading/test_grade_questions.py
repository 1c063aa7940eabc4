"""The public exam, question by question (issue 51 item 6): `toolkit grade --questions` shows
each question's family, tier, prompt end, answer, what the bundle wrote (escaped) and pass,
and `--json` carries it; on a hidden exam, by the exam's own manifest, it is refused before
any work whatever else is given, and a hidden grading never keeps an output (a canary)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from grading_helpers import ORACLE, MakeBundle, MakeExam, code_questions

from exam_builder.build import build_exam
from exam_builder.exam_file import MANIFEST_FILE, sha256_file
from exam_builder.manifest import Manifest, load_manifest
from tests.stats.results_factory import track_dict, write_registry
from toolkit.cli import cli
from toolkit.grading import grade_bundle
from toolkit.grading.questions import QuestionsRefused, grade_questions, printable

REPO = Path(__file__).resolve().parents[2]
CANARY = "CANARY-7f3a9e"
# Right on even questions; on odd ones an escape sequence that would retitle a terminal.
MIXED = """
    import re

    class Mixed:
        def generate(self, prompts, lengths):
            out = []
            for prompt, n in zip(prompts, lengths):
                code = re.findall(rb"code is (\\w+)", prompt)[0]
                odd = int(re.findall(rb"Memo (\\d+)", prompt)[0]) % 2
                text = b"\\x1b]0;pwned\\x07<b>x</b>" if odd else code
                out.append(text[:n].ljust(n, b"?"))
            return out

    def load(bundle_dir, device):
        return Mixed()
"""


@pytest.fixture(scope="module")
def base_manifest(tmp_path_factory: pytest.TempPathFactory) -> Manifest:
    out = tmp_path_factory.mktemp("built") / "exam"
    demo = REPO / "exam_builder" / "banks" / "public" / "validation"
    build_exam(demo, out, english_text=None, allow_in_repo=True)
    return load_manifest(out / MANIFEST_FILE)


def _marked(exam: Path, base: Manifest, *, public: bool) -> Path:
    """A manifest beside `exam` that describes it, marking it public or hidden."""
    lines = exam.read_text().splitlines()
    quality = base.quality.model_copy(update={"public_bank": public})
    manifest = base.model_copy(
        update={"exam_sha256": sha256_file(exam), "questions": len(lines), "quality": quality}
    )
    (exam.parent / MANIFEST_FILE).write_text(manifest.model_dump_json(indent=2))
    return exam


def test_a_public_exam_question_by_question(
    make_bundle: MakeBundle, make_exam: MakeExam, base_manifest: Manifest, tmp_path: Path
) -> None:
    questions = [dict(q, tier=1) for q in code_questions(4)]
    exam = _marked(make_exam(questions), base_manifest, public=True)
    out = tmp_path / "report.json"
    args = ["grade", str(make_bundle(MIXED)), "--exam", str(exam), "--questions"]
    done = CliRunner().invoke(cli, [*args, "--no-ablation", "--json", str(out)])
    assert done.exit_code == 0, done.output
    assert "Question by question" in done.output and "\x1b" not in done.output
    assert "\\x1b]0;p" in done.output  # shown (the answer's length of it), escaped
    rows = json.loads(out.read_text())["questions"]
    assert [r["passed"] for r in rows] == [True, False, True, False]
    first, second = rows[0], rows[1]
    assert first["family"] == "extraction" and first["tier"] == 1
    assert first["expected"] == first["written"] == "K0Q0Z"
    assert first["prompt_tail"].endswith("asked again, the code is ")
    assert second["written"] == "\\x1b]0;p" and second["expected"] == "K1Q7Z"


def test_a_hidden_exam_is_refused_whatever_is_given(
    make_bundle: MakeBundle, make_exam: MakeExam, base_manifest: Manifest
) -> None:
    canary = [dict(q, answer=CANARY, prompt=q["prompt"] + CANARY) for q in code_questions(2)]
    exam = _marked(make_exam(canary), base_manifest, public=False)
    bundle = make_bundle(ORACLE)
    for extra in ([], ["--public"], ["--public", "--track", "demo-cpu-3"]):
        done = CliRunner().invoke(
            cli, ["grade", str(bundle), "--exam", str(exam), "--questions", *extra]
        )
        assert done.exit_code == 2, done.output
        assert "is a hidden exam" in done.output and "grading settings" not in done.output
        assert CANARY not in done.output
    with pytest.raises(QuestionsRefused):
        grade_questions(bundle, exam, hidden=False, public=True)


def test_an_exam_without_its_manifest_is_refused(
    make_bundle: MakeBundle, make_exam: MakeExam
) -> None:
    exam = make_exam(code_questions(2))
    done = CliRunner().invoke(
        cli, ["grade", str(make_bundle(ORACLE)), "--exam", str(exam), "--questions"]
    )
    assert done.exit_code == 2 and "no manifest.json beside it" in done.output, done.output


def test_a_hidden_grading_keeps_no_output(make_bundle: MakeBundle, make_exam: MakeExam) -> None:
    """Even asked to, the grader keeps nothing the bundle wrote when the grading is hidden."""
    echo = """
        class Echo:
            def generate(self, prompts, lengths):
                return [p[-n:] for p, n in zip(prompts, lengths)]

        def load(bundle_dir, device):
            return Echo()
    """
    canary = [dict(q, prompt=q["prompt"] + CANARY) for q in code_questions(2)]
    written: dict[str, bytes] = {}
    report = grade_bundle(
        make_bundle(echo), make_exam(canary), phases=("generate",), _written=written
    )
    assert written == {} and report.questions is None
    assert CANARY not in report.model_dump_json()


def test_printable_escapes_every_control_character() -> None:
    assert printable("a\x1b[2Jb\nc\u202ed\\", 40) == "a\\x1b[2Jb\\nc\\u202ed\\\\"
    assert printable("x" * 50, 10, tail=True) == "…" + "x" * 10


def test_an_official_tracks_exam_is_refused_even_marked_public(
    make_bundle: MakeBundle, make_exam: MakeExam, base_manifest: Manifest, tmp_path: Path
) -> None:
    exam = _marked(make_exam(code_questions(2)), base_manifest, public=True)
    registry = tmp_path / "registry"
    write_registry(registry, [track_dict("v9-official", exam_sha256=sha256_file(exam))])
    args = ["grade", str(make_bundle(ORACLE)), "--exam", str(exam), "--questions"]
    done = CliRunner().invoke(cli, [*args, "--registry", str(registry)])
    assert done.exit_code == 2, done.output
    assert "hidden exam of track 'v9-official'" in done.output, done.output
