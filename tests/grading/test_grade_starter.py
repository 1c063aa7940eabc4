"""End to end: train the starter (tiny preset, briefly), grade its bundle twice on the demo exam.

This is the path every run takes: `python starter/train.py` in a workspace, then the grader
(the training is `trained_starter` in conftest.py, shared with the other grading tests).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from grading_helpers import STARTER_BUDGET_S, STARTER_STEPS, TrainedStarter

from toolkit.grading import grade_bundle

REPO = Path(__file__).resolve().parents[2]
STARTER = REPO / "toolkit" / "starter"


@pytest.mark.slow
def test_training_respects_its_budget(trained_starter: TrainedStarter) -> None:
    bundle, _, wall = trained_starter
    summary = json.loads((bundle / "train_summary.json").read_text())
    # The stop rule uses step and evaluation times measured during the run; other test runs on
    # the same CPU can slow the export down after that, so allow a little slack here.
    assert summary["elapsed_s"] <= STARTER_BUDGET_S * 1.05, summary
    assert (
        wall <= STARTER_BUDGET_S * 1.05 + 5
    )  # interpreter start-up before the script's clock starts
    assert 0 < summary["steps"] <= STARTER_STEPS and summary["val_bpb"] < 8.0  # learned something
    assert abs(summary["check_bpb_bundle"] - summary["check_bpb_float"]) < 0.05


@pytest.mark.slow
def test_starter_bundle_grades_identically_twice(
    trained_starter: TrainedStarter, tmp_path: Path
) -> None:
    bundle, exam, _ = trained_starter
    # Three questions of each family (24): the whole exam twice took 4.5 minutes of the suite,
    # and a whole run's grading on it is tested end to end elsewhere (tests/run/test_run.py).
    per_family: dict[str, int] = {}
    lines = []
    for line in exam.read_text().splitlines():
        family = json.loads(line)["family"]
        per_family[family] = per_family.get(family, 0) + 1
        if per_family[family] <= 3:
            lines.append(line + "\n")
    sample = tmp_path / "sample.jsonl"  # (the shared exam's folder is only read)
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
