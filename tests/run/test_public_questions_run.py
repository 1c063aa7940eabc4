"""A run's public submissions, question by question, in `toolkit view` (issue 51 item 6): the
public scoring keeps each question's row beside the candidate's archive (hashed into the
signed result like every artifact), and the live page shows them escaped. The same run's
published log names no path of the operator's machine (item 4)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.run.conftest import ShellAgent, SpecFactory
from toolkit import view
from toolkit.results.model import load_run
from toolkit.run import journal
from toolkit.run.artifacts import CANDIDATES_DIR, check_files
from toolkit.run.orchestrate import execute_run
from toolkit.view.questions import questions_section

BUNDLE = """mkdir -p bundles/b
cat > bundles/b/inference.py <<'PYEOF'
class Model:
    def generate(self, prompts, lengths):
        return [(b"<i>\\x1b[2J" + b" " * n)[:n] for n in lengths]

def load(bundle_dir, device):
    return Model()
PYEOF
runner submit bundles/b
runner promote c001
"""


def test_a_runs_public_submission_is_kept_question_by_question(make_spec: SpecFactory) -> None:
    spec = make_spec(ShellAgent(BUNDLE), budget=60, per_call=30, reserved=5)
    result = execute_run(spec)
    assert result.status in ("valid", "failed"), result.status_reason
    path = spec.results_dir / "demo-cpu-3" / f"{result.run_id}.json"
    folder = path.parent / result.run_id
    rows = json.loads((folder / CANDIDATES_DIR / "c001.questions.json").read_text())
    assert len(rows) == len(spec.public_set.read_text().splitlines())
    wrote = "<i>\\x1b[2J" + " " * 200  # what the bundle wrote, escaped; each cut to its answer
    assert all(not r["passed"] and wrote.startswith(r["written"]) for r in rows), rows
    assert check_files(path, load_run(path))[0] == []  # bound by the signed result
    # The run log is published: its paths are within the state and results folders only.
    log = (folder / "agent.log").read_text()
    [first] = [line for line in log.splitlines() if "] workspace " in line]
    assert f"workspace $ARI_HOME/runs/{result.run_id}/" in first, first
    assert f"results demo-cpu-3/{result.run_id} in the results folder" in first, first
    assert str(spec.results_dir) not in log and str(Path.home()) not in log
    section = questions_section(folder)
    assert "c001: 0/" in section and "&lt;i&gt;\\x1b[2J" in section and "<i>" not in section


def test_the_live_page_shows_the_section(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARI_HOME", str(tmp_path / "home"))
    results, artifacts = tmp_path / "results", tmp_path / "art"
    (artifacts / CANDIDATES_DIR).mkdir(parents=True)
    row = {"id": "q1", "family": "records", "tier": 1, "prompt_tail": "locker K",
           "expected": "abc", "written": "<script>x</script>", "passed": False}  # fmt: skip
    (artifacts / CANDIDATES_DIR / "c001.questions.json").write_text(json.dumps([row]))
    (artifacts / CANDIDATES_DIR / "c002.questions.json").write_text("{not rows")
    entry = journal.Entry(
        run_id="r1", track="demo-cpu-3", model="m", effort=None, seed=0, agent="scripted",
        started_at=datetime.now(UTC), budget_s=300, harness=str(tmp_path / "gone"),
        artifacts=str(artifacts), results_dir=str(results),
    )  # fmt: skip
    journal.append(entry)
    page = (view.live_run("r1") or b"").decode()
    assert "Public submissions, question by question" in page
    assert "&lt;script&gt;x&lt;/script&gt;" in page and "<script>x" not in page
    assert "c002: its rows could not be read" in page
