"""`scripts/gpu-check.sh` rehearsed on a CPU: every step of the GPU server check runs with the
same commands and flags as on an H100, on a small preset and short budgets (its numbers mean
nothing here). A session lent a GPU has minutes, not hours: a flag a benchmark dropped, or a
summary that reads a field a result no longer has, must fail here first."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gpu-check.sh"

# A CPU stand-in for each knob; the host's own checks (doctor, the cgroup suite) are tested
# elsewhere and only say NO on a box without a GPU.
REHEARSAL = {
    "DEVICE": "cpu",
    "PRESET": "micro",
    "PRESETS": "micro",
    "VARIANTS": "micro,micro+n_head=1",
    "TRAIN_S": "3",
    "CAL_PRESET": "micro",
    "BUDGETS": "3",
    "FROM": "demo-cpu-3",
    "SCALE": "cpu",
    "LEARN_S": "16",
    "BUDGET": "25",
    "REPEAT": "1",
    "SKIP": "doctor,check-cgroup2",
}


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The script's own folder (its demo exam and public set, built once for the module)."""
    return tmp_path_factory.mktemp("gpu-check-work")


def rehearse(mode: str, work: Path, tmp_path: Path, **extra: str) -> tuple[str, Path]:
    out = tmp_path / mode
    env = {**os.environ, **REHEARSAL, "PY": sys.executable, "WORK": str(work)}
    env.update(extra)
    done = subprocess.run(
        ["bash", str(SCRIPT), mode, str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout, out


def verdicts(output: str) -> dict[str, str]:
    """Each step's PASS / FAIL / skip, as the script says it."""
    found = re.findall(r"^== +\d+s (PASS|FAIL|skip) ([\w-]+)", output, re.MULTILINE)
    return {name: verdict for verdict, name in found}


@pytest.mark.slow
def test_the_official_mode_runs_every_step_and_summarises_a_valid_run(
    work: Path, tmp_path: Path
) -> None:
    # bench-decode's flags are checked by the failed-step test below (it fails past them).
    output, out = rehearse("official", work, tmp_path, SKIP="doctor,check-cgroup2,bench-decode")
    assert verdicts(output) == {
        "doctor": "skip",
        "check-cgroup2": "skip",
        "bench-decode": "skip",
        "bench-grade": "PASS",
        "official-run": "PASS",
    }, output[-3000:]
    summary = (out / "official-summary.txt").read_text()
    assert summary.startswith("status valid"), summary
    # The bucketed grading time is all the result says; the summary reads the operator log.
    assert re.search(r"^final grading \d+\.\d{3} s \(operator log\)$", summary, re.M), summary
    result = json.loads((out / "official-result.json").read_text())
    assert result["timings"]["budget_s"] == 25
    assert (out / "official-artifacts.tar.gz").stat().st_size > 0
    grade = json.loads((out / "bench-grade.json").read_text())
    assert grade, "bench_grade wrote no medians"


@pytest.mark.slow
def test_the_mfu_and_calibration_modes_run_every_step(work: Path, tmp_path: Path) -> None:
    # No PRESETS: bench-train trains the variant bench-step found fastest and the first one.
    variants = "micro+n_layer=3,micro"
    output, out = rehearse("mfu", work, tmp_path, PRESETS="", VARIANTS=variants)
    assert verdicts(output) == {"bench-step": "PASS", "bench-train": "PASS"}, output[-3000:]
    rows = json.loads((out / "bench-step.json").read_text())
    assert [r["variant"] for r in rows] == variants.split(","), rows
    assert all(r["seconds"] > 0 for r in rows), rows
    fastest = max(rows, key=lambda r: r["bytes_per_s"])["variant"]  # no MFU on a CPU
    trained = json.loads((out / "bench-train.json").read_text())
    assert list(trained) == list(dict.fromkeys([fastest, "micro+n_layer=3"])), output[-3000:]

    output, out = rehearse("calibrate", work, tmp_path)
    assert verdicts(output) == {"calibration": "PASS"}, output[-3000:]
    assert (out / "calibration" / "calibration.json").is_file()


@pytest.mark.slow
def test_the_learn_mode_runs_both_learners_on_the_families_it_is_given(
    work: Path, tmp_path: Path
) -> None:
    """Two families of the eight (LEARN_FAMILIES): the flags and the tables are what this
    checks, and each family costs a training and a grading; the cap is shared among them."""
    output, out = rehearse("learn", work, tmp_path, LEARN_STEPS="3", LEARN_FAMILIES="records,lists")
    assert verdicts(output) == {"learn-own": "PASS", "learn-public": "PASS"}, output[-3000:]
    for name, learner in (("learn.json", "own-bank"), ("learn-public.json", "public-side")):
        table = json.loads((out / name).read_text())
        assert table["scale"] == "cpu" and table["seconds_per_family"] == 4, name
        assert table["steps_per_family"] == 3 and table["learner"] == learner, name
        assert sorted(table["families"]) == ["lists", "records"], name
        assert 0 < table["total"]["total"] < 100, name


def test_a_failed_step_is_said_and_the_next_one_still_runs(work: Path, tmp_path: Path) -> None:
    """One broken step costs that step, not the rest of a session's GPU minutes."""
    skip = "doctor,check-cgroup2,bench-train"
    output, out = rehearse("speed", work, tmp_path, PRESET="no_such_preset", SKIP=skip)
    assert verdicts(output) == {
        "doctor": "skip",
        "check-cgroup2": "skip",
        "bench-decode": "FAIL",
        "bench-grade": "FAIL",
        "bench-train": "skip",
    }, output[-3000:]
    for step in ("bench-decode", "bench-grade"):  # past their flags, at the preset's name
        assert "no_such_preset" in (out / f"{step}.log").read_text()
        assert "unrecognized arguments" not in (out / f"{step}.log").read_text()


def test_an_unknown_mode_is_refused(tmp_path: Path) -> None:
    done = subprocess.run(
        ["bash", str(SCRIPT), "nonsense", str(tmp_path / "out")],
        env={**os.environ, "PY": sys.executable, "WORK": str(tmp_path / "work")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "unknown mode nonsense" in done.stderr
