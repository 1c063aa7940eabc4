"""End to end: train the starter (tiny preset, briefly), grade its bundle twice on the demo exam.

This is the path every run takes: `python starter/train.py` in a workspace, then the grader.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from exam_builder.build import build_exam
from toolkit.grading import grade_bundle
from toolkit.text.data import prepare_train_data

REPO = Path(__file__).resolve().parents[2]
STARTER = REPO / "toolkit" / "starter"
DEMO_BANK = REPO / "exam_builder" / "banks" / "public" / "demo"
BUDGET_S = 60


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, float]:
    """(bundle, exam, wall seconds of train.py) from a workspace laid out like a run's."""
    workspace = tmp_path_factory.mktemp("workspace")
    shutil.copytree(STARTER, workspace / "starter", ignore=shutil.ignore_patterns("TASK.md"))
    prepare_train_data(None, workspace / "data")
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "starter/train.py",
            "--data",
            "data",
            "--out",
            "bundles/b1",
            "--budget-s",
            str(BUDGET_S),
            "--device",
            "cpu",
            "--preset",
            "tiny",
        ],
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=BUDGET_S * 4,
    )
    wall = time.monotonic() - started
    assert done.returncode == 0, done.stdout + done.stderr
    assert "val bpb" in done.stdout
    exam_dir = tmp_path_factory.mktemp("exam") / "demo"
    build_exam(DEMO_BANK, exam_dir, english_text=None)
    return workspace / "bundles" / "b1", exam_dir / "exam.jsonl", wall


@pytest.mark.slow
def test_training_respects_its_budget(trained: tuple[Path, Path, float]) -> None:
    bundle, _, wall = trained
    summary = json.loads((bundle / "train_summary.json").read_text())
    # The stop rule uses step and evaluation times measured during the run; other test runs on
    # the same CPU can slow the export down after that, so allow a little slack here.
    assert summary["elapsed_s"] <= BUDGET_S * 1.05, summary
    assert wall <= BUDGET_S * 1.05 + 5  # interpreter start-up before the script's clock starts
    assert summary["steps"] > 0 and summary["val_bpb"] < 8.0  # learned something
    assert abs(summary["check_bpb_bundle"] - summary["check_bpb_float"]) < 0.05


@pytest.mark.slow
def test_starter_bundle_grades_identically_twice(trained: tuple[Path, Path, float]) -> None:
    bundle, exam, _ = trained
    # Three questions of each family (24): the whole exam twice took 4.5 minutes of the suite,
    # and a whole run's grading on it is tested end to end elsewhere (tests/run/test_run.py).
    per_family: dict[str, int] = {}
    lines = []
    for line in exam.read_text().splitlines():
        family = json.loads(line)["family"]
        per_family[family] = per_family.get(family, 0) + 1
        if per_family[family] <= 3:
            lines.append(line + "\n")
    sample = exam.with_name("sample.jsonl")
    sample.write_text("".join(lines))
    first = grade_bundle(bundle, sample)
    second = grade_bundle(bundle, sample)
    assert first.ok and first.reason is None, first.reason
    assert first.score.total == 3 * len(per_family) == 24
    assert first.bits_per_byte is not None and 0 < first.bits_per_byte < 8.0
    assert first.packed_bytes is not None and first.packed_bytes < 16_000_000
    ignore = {"timings"}
    assert first.model_dump(exclude=ignore) == second.model_dump(exclude=ignore)


def test_starter_imports_only_torch_numpy_and_the_standard_library() -> None:
    allowed = set(sys.stdlib_module_names) | {"torch", "numpy", "model", "export"}
    for path in STARTER.glob("*.py"):
        for line in path.read_text().splitlines():
            words = line.split()
            if len(words) >= 2 and words[0] in ("import", "from") and not line.startswith(" "):
                top = words[1].split(".")[0]
                assert top in allowed, f"{path.name} imports {top}"
