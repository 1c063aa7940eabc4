"""The per-run JSON model: valid files load, bad ones fail naming the file and the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolkit.results.model import ResultsError, RunResult, json_schema, load_run, save_run

SHA = "a" * 64


def run_dict(**over: Any) -> dict[str, Any]:
    """A minimal valid run (test data)."""
    base: dict[str, Any] = {
        "run_id": "r1",
        "track": "demo-cpu-3",
        "model": "test-model",
        "agent": "scripted",
        "seed": 0,
        "started_at": "2026-11-22T10:00:00Z",
        "status": "valid",
        "score": {"percent": 25.0, "passed": 1, "total": 4},
        "timings": {"budget_s": 60, "used_s": 30, "runner_s": 20},
        "config": {
            "toolkit_version": "0.1.0",
            "task_brief_sha256": SHA,
            "exam_sha256": SHA,
            "public_set_sha256": SHA,
            "backend": "local",
            "protocol_revision": 1,
        },
    }
    base.update(over)
    return base


def test_round_trip(tmp_path: Path) -> None:
    result = RunResult.model_validate(run_dict())
    path = save_run(result, tmp_path)
    assert path == tmp_path / "demo-cpu-3" / "r1.json"
    assert load_run(path) == result
    assert not list(path.parent.glob("*.tmp"))


@pytest.mark.parametrize(
    ("over", "field"),
    [
        ({"score": {"percent": -5.0, "passed": 0, "total": 4}}, "score.percent"),
        ({"seed": "zero"}, "seed"),
        ({"status": "great"}, "status"),
        ({"surprise": 1}, "surprise"),
        ({"score": {"percent": 50.0, "passed": 1, "total": 4}}, "score"),
    ],
)
def test_bad_field_is_named(tmp_path: Path, over: dict[str, Any], field: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(run_dict(**over)))
    with pytest.raises(ResultsError) as info:
        load_run(path)
    assert str(path) in str(info.value)
    assert f"'{field}" in str(info.value)


def test_missing_field_is_named(tmp_path: Path) -> None:
    data = run_dict()
    del data["model"]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ResultsError, match=r"field 'model'"):
        load_run(path)


def test_invalid_json_names_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"run_id": "r1",\n oops}')
    with pytest.raises(ResultsError, match=r"bad.json: invalid JSON at line 2"):
        load_run(path)


def test_status_rules() -> None:
    with pytest.raises(ValueError, match="failed run scores 0"):
        RunResult.model_validate(run_dict(status="failed", status_reason="x"))
    with pytest.raises(ValueError, match="needs a status_reason"):
        RunResult.model_validate(
            run_dict(status="invalid", score={"percent": 0.0, "passed": 0, "total": 4})
        )


def test_best_public_score() -> None:
    cand = {"submitted_at": "2026-11-22T10:01:00Z", "elapsed_s": 60, "sha256": SHA}
    result = RunResult.model_validate(
        run_dict(
            candidates=[
                {**cand, "id": "c1", "packed_bytes": 10, "public_score": 40.0},
                {**cand, "id": "c2", "packed_bytes": 10, "public_score": 90.0},
                {**cand, "id": "c3", "packed_bytes": 10, "error": "load failed"},
            ]
        )
    )
    assert result.best_public_score == 90.0


def test_schema_documents_every_field() -> None:
    schema = json.loads(json_schema())
    assert schema["properties"]["status"]["description"]
    for name, definition in schema["$defs"].items():
        for field, spec in definition.get("properties", {}).items():
            assert spec.get("description"), f"{name}.{field} has no description"
