"""The final grading's minutes are not silent on the operator's terminal (issue 39): its steps
(each phase's load included) reach `grading_progress`, and nothing of them reaches agent.log,
the result or the agent (a hidden grading publishes no time but a coarse bucket)."""

from __future__ import annotations

import pytest

from tests.run.conftest import ShellAgent, SpecFactory
from toolkit.grading.progress_bar import ProgressBar, progress_lines
from toolkit.run.orchestrate import execute_run

BUNDLE = """mkdir -p bundles/b
cat > bundles/b/inference.py <<'PYEOF'
class Model:
    def generate(self, prompts, lengths):
        return [b" " * n for n in lengths]

def load(bundle_dir, device):
    return Model()
PYEOF
runner submit bundles/b
runner promote c001
"""


def test_the_lines_say_each_step_and_at_most_one_line_between() -> None:
    now = [0.0]
    said: list[str] = []
    report = progress_lines(said.append, prefix="final grading: ", every_s=15, clock=lambda: now[0])
    report("phase 1: load the bundle", 0, 1)
    now[0] = 40.0
    report("phase 1: load the bundle", 1, 1)
    report("phase 1: generate", 0, 100)
    for done in range(1, 100):
        now[0] += 0.5  # 50 s in all: three lines in between, not 99
        report("phase 1: generate", done, 100)
    report("phase 1: generate", 100, 100)
    assert said[:2] == [
        "final grading: phase 1: load the bundle...",
        "final grading: phase 1: load the bundle: done in 40 s",
    ]
    between = [line for line in said if line.startswith("final grading: phase 1: generate ")]
    assert len(between) == 3, said
    assert said[-1] == "final grading: phase 1: generate: done in 50 s"


def test_the_final_grading_reports_its_steps_to_the_operator_only(
    make_spec: SpecFactory,
) -> None:
    spec = make_spec(ShellAgent(BUNDLE), budget=60, per_call=30, reserved=5)
    steps: list[tuple[str, int, int]] = []
    result = execute_run(spec, grading_progress=lambda *step: steps.append(step))
    assert result.status in ("valid", "failed"), result.status_reason
    names = [name for name, _, _ in steps]
    assert names[0] == "phase 1: load the bundle" and ("phase 1: load the bundle", 1, 1) in steps
    assert "phase 1: generate" in names and "phase 2: load the bundle" in names
    folder = spec.results_dir / "demo-cpu-3" / result.run_id
    published = "".join(p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file())
    assert "load the bundle" not in published and "phase 1: generate" not in published


def test_a_grading_whose_stderr_is_not_a_terminal_says_its_steps_in_lines(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`toolkit grade` and `runs verify` draw a bar on a terminal; piped, a bar showed nothing
    until the end (minutes): they say each step in lines instead."""
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(name, raising=False)
    with ProgressBar() as bar:
        bar.update("phase 1: load the bundle", 0, 1)
        bar.update("phase 1: load the bundle", 1, 1)
        bar.update("phase 1: generate", 0, 6)
    err = capsys.readouterr().err
    assert "phase 1: load the bundle...\n" in err and "phase 1: load the bundle: done in" in err
    assert "phase 1: generate..." in err and "\x1b[" not in err


def test_a_step_first_reported_complete_is_one_line_without_dots() -> None:
    said: list[str] = []
    report = progress_lines(said.append, prefix="final grading: ", clock=lambda: 0.0)
    report("ablation: load the bundle", 0, 1)  # its load fails: no "done in" follows
    report("ablation: done, the bundle failed on the ablated files", 1, 1)
    assert said == [
        "final grading: ablation: load the bundle...",
        "final grading: ablation: done, the bundle failed on the ablated files",
    ]
