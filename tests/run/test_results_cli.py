"""`toolkit runs validate` names the bad file and field; the exported schema is up to date."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tests.signed_results import sign_run
from toolkit.cli import cli
from toolkit.results.model import json_schema

SCHEMA = Path(__file__).resolve().parents[2] / "toolkit" / "schemas" / "run.schema.json"

GOOD = {
    "run_id": "r1",
    "track": "demo-cpu-3",
    "model": "none",
    "agent": "scripted",
    "seed": 0,
    "started_at": "2026-01-01T00:00:00Z",
    "status": "failed",
    "status_reason": "no candidate was promoted",
    "score": {"percent": 0.0, "passed": 0, "total": 100},
    "timings": {"budget_s": 300, "used_s": 10, "runner_s": 5},
    "config": {
        "toolkit_version": "0.1.0",
        "task_brief_sha256": "a" * 64,
        "exam_sha256": "b" * 64,
        "public_set_sha256": "c" * 64,
        "backend": "local",
        "protocol_revision": 1,
    },
}


def _write(root: Path, name: str, data: dict[str, object]) -> Path:
    path = root / "demo-cpu-3" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(sign_run(root, data)))
    return path


def test_exported_schema_is_up_to_date() -> None:
    assert SCHEMA.read_text() == json_schema(), (
        "toolkit/schemas/run.schema.json is stale: regenerate it with "
        "`toolkit runs schema > toolkit/schemas/run.schema.json`"
    )


def test_validate_accepts_a_good_file(tmp_path: Path) -> None:
    _write(tmp_path, "r1.json", GOOD)
    done = CliRunner().invoke(cli, ["runs", "validate", str(tmp_path)])
    assert done.exit_code == 0, done.output
    assert "ok:" in done.output


def test_validate_rejects_a_bad_file_naming_file_and_field(tmp_path: Path) -> None:
    bad = {**GOOD, "score": {"percent": 150.0, "passed": 0, "total": 100}}
    path = _write(tmp_path, "r2.json", bad)
    done = CliRunner().invoke(cli, ["runs", "validate", str(tmp_path)])
    assert done.exit_code == 1
    assert str(path) in done.output and "score.percent" in done.output


def test_validate_rejects_an_unknown_field(tmp_path: Path) -> None:
    path = _write(tmp_path, "r3.json", {**GOOD, "scroe": 1})
    done = CliRunner().invoke(cli, ["runs", "validate", str(path)])
    assert done.exit_code == 1
    assert str(path) in done.output and "scroe" in done.output


def test_validate_catches_a_history_cut_short(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from toolkit.results.model import Candidate
    from toolkit.run.history import SubmissionHistory

    history = SubmissionHistory(tmp_path / "demo-cpu-3" / "r1" / "history.jsonl")
    candidates = []
    for n in (1, 2):
        c = Candidate(
            id=f"c00{n}",
            submitted_at=datetime.now(UTC),
            elapsed_s=n,
            sha256=f"{n:064x}",
            packed_bytes=10,
        )
        history.add_candidate(c, source="bundles/b")
        candidates.append(json.loads(c.model_dump_json()))
    _write(tmp_path, "r1.json", {**GOOD, "candidates": candidates})
    assert CliRunner().invoke(cli, ["runs", "validate", str(tmp_path)]).exit_code == 0
    lines = history.path.read_bytes().splitlines(keepends=True)
    history.path.write_bytes(lines[0])
    done = CliRunner().invoke(cli, ["runs", "validate", str(tmp_path)])
    assert done.exit_code == 1 and "history was cut or edited" in done.output
