"""Candidate feedback is no side channel (issue 8, finding 4).

`runner submit` shows the agent its bundle's own `load()` error (the agent needs it to debug).
That is safe only if public scoring sees nothing the runner cannot. One probe (`probe.py`), run
once as a bundle during public scoring (reporting through its error text, as an attacker would)
and once through `runner`, looks at every place an exam could be; what public scoring saw must
be a subset of what the runner saw, and neither may see anything exam-like.
"""

from __future__ import annotations

from tests.run import probe
from tests.run.conftest import REPO, Exposed, ShellAgent, SpecFactory, exam_marks
from toolkit.run.orchestrate import execute_run
from toolkit.run.recovery import runs_root


def candidate_locations(exposed: Exposed) -> list[str]:
    """Where an exam or what leads to one may be: the operator's exam and its folder, the
    state folder and its built exams, the exam engine and its banks, the checkout and its git
    history, the results, and the writable places a bundle could leave something in."""
    return [
        str(exposed.exam),
        str(exposed.exam.parent),
        str(exposed.home),
        str(exposed.home / "exams"),
        str(REPO / "exam_builder"),
        str(REPO / "exam_builder" / "banks"),
        str(REPO),
        str(REPO / ".git"),
        str(exposed.results),
        "/run/lock",
        "/var/lock",
        "/dev/shm",
        "/tmp",
    ]


def test_public_scoring_sees_no_more_than_the_runner(
    make_spec: SpecFactory, exposed: Exposed
) -> None:
    locations = candidate_locations(exposed)
    script = f"""mkdir -p bundles/probe loot
cat > bundles/probe/inference.py <<'PYEOF'
{probe.source(locations)}
PYEOF
runner submit bundles/probe > loot/submit.txt 2>&1
runner python bundles/probe/inference.py > loot/runner.txt 2>&1
"""
    spec = make_spec(
        ShellAgent(script),
        budget=90,
        per_call=60,
        reserved=5,
        exam=exposed.exam,
        results_dir=exposed.results,
    )
    # The loot is read after the run: no size cap, whose filesystem (and files) go with it.
    spec.track = spec.track.model_copy(update={"workspace_disk_bytes": None})
    result = execute_run(spec)
    assert result.status == "failed", result.status_reason  # nothing promoted
    loot = runs_root() / result.run_id / "workspace" / "loot"
    submitted = (loot / "submit.txt").read_text(errors="replace")
    through_runner = (loot / "runner.txt").read_text(errors="replace")
    public = probe.parse(submitted)
    runner = probe.parse(through_runner)
    assert public is not None, f"no probe report in the feedback: {submitted}"
    assert runner is not None, f"no probe report from the runner: {through_runner}"
    assert "public scoring failed" in submitted  # the bundle's own error reached the agent
    assert [loc for loc, seen in zip(locations, public, strict=True) if seen.examlike] == []
    assert [loc for loc, seen in zip(locations, runner, strict=True) if seen.examlike] == []
    assert probe.not_a_subset(public, runner, locations) == []
    exam_text = exposed.exam.read_bytes()
    for mark in exam_marks(exposed.exam):
        assert mark not in submitted.encode()
    assert all(m in exam_text for m in exam_marks(exposed.exam)[1::2])  # the marks do match
