"""Every grading hides the exam, the state folder, the exam engine and the checkout, by default.

A probe bundle's `load()` looks for the exam where it lies, for the state folder's built exams,
for the exam engine (solvers, public banks) and the checkout's history, and reports everything
it could see through its error text: the report's reason (and, in a run, the candidate's public
scoring error and the run's status reason) must say it found nothing.

The exam is put where only its own hiding covers it: a folder outside /tmp (which every sandbox
already sees as its own), readable by the sandbox user, and with `checkout_root` patched out so
that the checkout's hiding does not cover it by accident.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from grading_helpers import MakeBundle, MakeExam, code_questions, run_spec, submit_and_promote

import exam_builder
import toolkit.protected
from exam_builder.exam_file import load_exam
from tests.host_scratch import scratch_base
from toolkit.grading import grade_bundle, secret_log
from toolkit.paths import state_dir
from toolkit.run.inputs import DEMO_BANK, built_exam
from toolkit.run.orchestrate import execute_run

REPO = Path(__file__).resolve().parents[2]
FOUND = "probe found: "

PROBE = """
import json, os

TARGETS = {targets!r}
NEEDLES = [n.encode() for n in {needles!r}]


def look(label, path, found, budget):
    try:
        if os.path.isfile(path):
            with open(path, "rb") as f:
                data = f.read(1 << 20)
            hit = [n for n in NEEDLES if n in data]
            found.append(label + (": holds the exam" if hit else ": readable"))
            return
    except OSError:
        return
    readable = None
    for root, dirs, files in os.walk(path):
        for name in files:
            if budget[0] <= 0:
                break
            budget[0] -= 1
            try:
                with open(os.path.join(root, name), "rb") as f:
                    data = f.read(1 << 20)
            except OSError:
                continue
            if any(n in data for n in NEEDLES):
                found.append(label + ": the exam's bytes in " + os.path.join(root, name))
                return
            readable = readable or os.path.join(root, name)
    if readable:
        found.append(label + ": readable " + readable)


def load(bundle_dir, device):
    found, budget = [], [5000]
    for label, path in TARGETS:
        look(label, path, found, budget)
    raise RuntimeError("{found}" + json.dumps(found))
"""


def probe_source(targets: list[tuple[str, str]], needles: list[str]) -> str:
    return PROBE.format(targets=targets, needles=needles, found=FOUND)


def found_in(text: str | None) -> list[str]:
    """What the probe reported, from a reason or error text holding its message."""
    assert text and FOUND in text, text
    try:
        found: list[str] = json.loads(text.split(FOUND, 1)[1].split("]", 1)[0] + "]")
    except ValueError:  # cut short: it found a lot
        return [text]
    return found


@pytest.fixture
def visible_scratch(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A world-readable folder outside /tmp that no protected path covers (see the docstring)."""
    monkeypatch.setattr(toolkit.protected, "checkout_root", lambda: None)
    base = scratch_base()
    folder = base / "test-scratch" / f"hiding-{uuid.uuid4().hex[:8]}"
    folder.mkdir(parents=True)
    for path in (folder, *folder.parents):
        if path == base.parent:
            break
        path.chmod(path.stat().st_mode | 0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _world_readable(folder: Path) -> None:
    for root, _dirs, files in os.walk(folder):
        os.chmod(root, 0o755)
        for name in files:
            os.chmod(os.path.join(root, name), 0o644)


def test_grading_hides_the_exam_state_folder_engine_and_banks_by_default(
    make_bundle: MakeBundle, visible_scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    needle = f"ZQX{uuid.uuid4().hex[:12]}"
    # The exam in a folder of its own, and a copy among the state folder's built exams.
    exam = visible_scratch / "exams-elsewhere" / "exam.jsonl"
    exam.parent.mkdir()
    questions = code_questions(2)
    questions[0]["answer"] = needle
    exam.write_text(
        "".join(json.dumps(q, sort_keys=True, separators=(",", ":")) + "\n" for q in questions)
    )
    home = visible_scratch / "ari-home"
    monkeypatch.setenv("ARI_HOME", str(home))
    (home / "exams" / "hidden").mkdir(parents=True)
    shutil.copy(exam, home / "exams" / "hidden" / "exam.jsonl")
    bank = visible_scratch / "hidden-bank"
    bank.mkdir()
    (bank / "bank.toml").write_text(f'seed = "{needle}"\n')
    _world_readable(visible_scratch)
    engine = Path(exam_builder.__file__).parent
    targets = [
        ("exam file", str(exam)),
        ("exam folder", str(exam.parent)),
        ("state folder", str(state_dir())),
        ("exam engine", str(engine)),
        ("engine solver", str(engine / "families" / "records.py")),
        ("public banks", str(engine / "banks" / "public")),
        ("toolkit", str(Path(toolkit.protected.__file__).parent)),
        ("hidden bank", str(bank)),
    ]
    # The probe first shows it can see what is *not* hidden (else finding nothing proves
    # nothing): its own source, which holds the needle, in the bundle folder it runs from.
    # (A sibling of the exam's folder is no control any more: a local sandbox sees only an
    # allow-list of the host, and that sibling is outside it.)
    control = [("control", "bundle/inference.py")]
    bundle = make_bundle(probe_source(control + targets, [needle]))
    # Public: the probe reports through its error text (a hidden grading keeps that for the
    # operator log).
    report = grade_bundle(bundle, exam, hide=[bank], hidden=False)
    assert found_in(report.reason) == ["control: holds the exam"], report.reason


def test_the_checkout_and_its_history_are_hidden(
    make_bundle: MakeBundle, make_exam: MakeExam
) -> None:
    root = toolkit.protected.checkout_root()
    if root is None:
        pytest.skip("the toolkit is installed, not run from a checkout: nothing to hide here")
    # The checkout itself stays listable (the interpreter's virtual environment lives in it
    # and is mounted over the cover); what is in it is not readable.
    targets = [
        ("git history", str(root / ".git")),
        ("engine in the checkout", str(root / "exam_builder")),
        ("demo bank", str(DEMO_BANK / "bank.toml")),
        ("results", str(root / "results")),
        ("scripts", str(root / "scripts")),
    ]
    report = grade_bundle(
        make_bundle(probe_source(targets, ["[[families]]"])),
        make_exam(code_questions(1)),
        hidden=False,
    )
    assert found_in(report.reason) == [], report.reason


def test_in_a_run_public_scoring_and_final_grading_hide_the_real_exam(
    visible_scratch: Path, tmp_path: Path
) -> None:
    # The run's exam kept by the operator outside the state folder, readable by anyone.
    exam = visible_scratch / "operator-exams" / "exam.jsonl"
    exam.parent.mkdir()
    shutil.copy(built_exam(DEMO_BANK, "demo"), exam)
    _world_readable(visible_scratch)
    needles = [q.answer for q in load_exam(exam) if len(q.answer) >= 8][:20]
    targets = [("run exam", str(exam)), ("run exam folder", str(exam.parent))]
    agent = submit_and_promote(probe_source(targets, needles))
    log = secret_log.log_path()
    logged_before = log.stat().st_size if log.exists() else 0  # the worker's other gradings
    result = execute_run(run_spec(agent, exam, tmp_path))
    # Public scoring (the candidate's feedback) and the final grading both ran the probe.
    public_error = result.candidates[0].error
    assert found_in(public_error) == [], public_error
    assert result.status == "failed", result.status_reason
    # The final grading is hidden: the run's reason is a category, the probe's report went to
    # the operator log.
    assert result.status_reason is not None and FOUND not in result.status_reason
    assert "load(): the bundle raised an error" in result.status_reason
    with log.open("rb") as file:
        file.seek(logged_before)
        details = [json.loads(line)["detail"] for line in file.read().splitlines()]
    probed = [d for d in details if FOUND in d]
    assert probed, details  # this run's probe report reached the operator log
    assert found_in(probed[-1]) == []


def test_in_a_run_a_malformed_reply_is_a_failed_run_not_an_invalid_one(tmp_path: Path) -> None:
    source = """
        import __main__
        _send = __main__.Channel.send
        def send(self, message):
            if "outputs" in message:
                message = {**message, "outputs": [1] * (len(message["outputs"]) - 1)}
            _send(self, message)
        __main__.Channel.send = send
        class M:
            def generate(self, prompts, lengths):
                return [b" " * n for n in lengths]
        def load(bundle_dir, device):
            return M()
    """
    result = execute_run(
        run_spec(submit_and_promote(source), built_exam(DEMO_BANK, "demo"), tmp_path)
    )
    assert result.status == "failed", result.status_reason
    assert "broke the grading protocol" in (result.status_reason or "")


def test_cover_hides_a_folder_around_what_the_worker_needs(tmp_path: Path) -> None:
    from toolkit.grading.hiding import cover

    checkout = tmp_path / "checkout"
    for rel in (".venv/bin", ".git", "exam_builder", "keep/phase1", "keep/phase2"):
        (checkout / rel).mkdir(parents=True)
    (checkout / "README.md").write_text("x")
    (checkout / "link").symlink_to("/usr")
    hidden = cover([checkout, tmp_path / "exam"], [checkout / ".venv", checkout / "keep/phase1"])
    assert hidden == sorted(
        [
            checkout / ".git",
            checkout / "README.md",
            checkout / "exam_builder",
            checkout / "keep/phase2",
            tmp_path / "exam",
        ]
    )  # never the kept paths, their folders, or a link's target
    assert cover([checkout / ".venv/bin"], [checkout / ".venv"]) == [checkout / ".venv/bin"]
    assert cover([checkout], [checkout]) == []
