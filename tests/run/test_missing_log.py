"""A chained log deleted after the run is reported as missing, not as a log that "ends at
entry 0" (issue 39): `runs validate` and `runs verify` share `check_logs`."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "stats"))

from results_factory import run_dict

from toolkit.results.model import RunResult
from toolkit.run.verify import check_logs


def test_a_deleted_audit_log_is_said_missing(tmp_path: Path) -> None:
    data = run_dict("r1", track="demo-cpu-3")
    data["artifacts"] = {"audit": "r1/audit.jsonl"}
    data["logs"] = {"audit": {"entries": 3, "sha256": "ab" * 32}}
    result = RunResult.model_validate(data)
    result_file = tmp_path / "demo-cpu-3" / "r1.json"
    (tmp_path / "demo-cpu-3" / "r1").mkdir(parents=True)  # the run folder, without its log
    problems = check_logs(result_file, result)
    assert len(problems) == 1, problems
    assert "missing: deleted or moved after the run (the result recorded 3 entries)" in problems[0]
    assert "entry 0" not in problems[0]
