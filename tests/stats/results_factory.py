"""Build small, clearly fake `results/` folders for the statistics and site tests (test data).

Shared by tests/stats and tests/site (the site's conftest puts this folder on sys.path).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.signed_results import sign_run

EXAM = "3f571c9c" + "0" * 56  # full hash whose published prefix is 3f571c9c (test data)
PUBLIC = "b" * 64
BRIEF = "c" * 64


def track_dict(track_id: str = "v1-test", **over: Any) -> dict[str, Any]:
    """A registry entry for a test track (100 questions, 1 hour, 3 seeds)."""
    base: dict[str, Any] = {
        "id": track_id,
        "title": f"Test track {track_id}",
        "description": "A track made up by the tests.",
        "benchmark_version": "1.0",
        "exam_sha256": EXAM[:8],
        "public_set_sha256": PUBLIC,
        "exam_questions": 100,
        "budget_s": 3600,
        "per_call_limit_s": 1200,
        "reserved_s": 300,
        "size_limit_bytes": 16_000_000,
        "hardware": "1x test GPU",
    }
    base.update(over)
    return base


def run_dict(
    run_id: str,
    *,
    track: str = "v1-test",
    model: str = "model-a",
    effort: str | None = None,
    seed: int = 0,
    passed: int = 50,
    status: str = "valid",
    revision: int = 1,
    bpb: float | None = 1.5,
    public: list[float] | None = None,
    **over: Any,
) -> dict[str, Any]:
    """A valid run scoring `passed` of 100 questions, with candidates scoring `public`."""
    public = [40.0, 60.0] if public is None else public
    candidates = [
        {
            "id": f"c{i:03d}",
            "submitted_at": f"2026-11-22T10:{10 + i:02d}:00Z",
            "elapsed_s": 600.0 * (i + 1),
            "sha256": f"{i:064x}",
            "packed_bytes": 1_000_000 + i,
            "public_score": p,
        }
        for i, p in enumerate(public)
    ]
    promoted = None
    if candidates and status != "failed":
        last = candidates[-1]
        promoted = {
            "id": last["id"],
            "sha256": last["sha256"],
            "packed_bytes": last["packed_bytes"],
            "promoted_at": last["submitted_at"],
            "elapsed_s": last["elapsed_s"],
        }
    base: dict[str, Any] = {
        "run_id": run_id,
        "track": track,
        "model": model,
        "effort": effort,
        "agent": "opencode",
        "seed": seed,
        "started_at": "2026-11-22T10:00:00Z",
        "status": status,
        "status_reason": None if status == "valid" else f"test: {status}",
        "score": {"percent": float(passed), "passed": passed, "total": 100},
        "bits_per_byte": bpb,
        "families": {
            "passages": {"passed": passed // 2, "total": 50},
            "records": {"passed": passed - passed // 2, "total": 50},
        },
        "promoted": promoted,
        "candidates": candidates,
        "timings": {"budget_s": 3600, "used_s": 3500, "runner_s": 3000},
        "config": {
            "toolkit_version": "0.1.0",
            "task_brief_sha256": BRIEF,
            "exam_sha256": EXAM,
            "public_set_sha256": PUBLIC,
            "backend": "local",
            "isolation": ["netns"],
            "protocol_revision": revision,
        },
    }
    base.update(over)
    return base


def write_registry(
    results: Path, tracks: list[dict[str, Any]], fixes: list[dict[str, Any]] | None = None
) -> None:
    """Write `tracks.json` (and `protocol_fixes.json` when given)."""
    results.mkdir(parents=True, exist_ok=True)
    (results / "tracks.json").write_text(json.dumps(tracks, indent=2), encoding="utf-8")
    if fixes is not None:
        (results / "protocol_fixes.json").write_text(json.dumps(fixes, indent=2), "utf-8")


def write_run(results: Path, run: dict[str, Any], artifacts: dict[str, str] | None = None) -> Path:
    """Write one run file (and its artifacts, name -> text) under results/<track>/."""
    folder = results / run["track"]
    folder.mkdir(parents=True, exist_ok=True)
    if artifacts:
        run = dict(run)
        run["artifacts"] = {}
        for name, text in artifacts.items():
            rel = f"{run['run_id']}/{name}"
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_text(text, encoding="utf-8")
            run["artifacts"][name] = rel
    path = folder / f"{run['run_id']}.json"
    path.write_text(json.dumps(sign_run(results, run), indent=2), encoding="utf-8")
    return path
