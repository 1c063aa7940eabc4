"""Helpers of the site tests: build the site from a fixture results folder (test data)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# The results factory is shared with the statistics tests.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "stats"))

from results_factory import run_dict, track_dict, write_registry, write_run

REPO = Path(__file__).resolve().parent.parent.parent


def build(
    results: Path, out: Path, config: Path = REPO / "mkdocs.yml"
) -> subprocess.CompletedProcess[str]:
    """`mkdocs build --strict` of `config` reading `results`, into `out`."""
    env = {
        **os.environ,
        "ARI_RESULTS_DIR": str(results),
        "NO_MKDOCS_2_WARNING": "1",
        "ARI_HOME": str(out.parent / "ari-home"),
    }
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


TRANSCRIPT_LINES = 8000  # ~270 KB: several pages of the transcript view


def make_fixture(results: Path) -> None:
    """Two tracks, ties, provisional, failed, invalid and legacy runs, artifacts (test data)."""
    fix = {
        "id": "fix-promote",
        "track": "v1-test",
        "date": "2026-11-01",
        "title": "Grade the promoted candidate",
        "description": "Runs before revision 2 were graded on their best public candidate.",
        "revision": 2,
        "action": "legacy",
    }
    write_registry(
        results,
        [
            track_dict(protocol_revision=2, title="Official test track"),
            track_dict("demo-test", demo=True, title="Demo test track", budget_s=600),
        ],
        [fix],
    )
    transcript = "".join(f"step {k}: the agent thinks <b>&</b>\n" for k in range(TRANSCRIPT_LINES))
    rows = [
        ("gpt-x", "high", [62, 66, 70]),  # 66 ± 2.3 -> [63.7, 68.3]
        ("claude-y", None, [58, 64]),  # 61 ± 3 -> [58, 64]: overlaps gpt-x -> tie at 1
        ("gemini-z", "low", [30]),  # single run: provisional, rank 3
        ("o-mini", None, [10, 0, 14]),  # a failed run counted as 0: 8 ± 4.2, rank 4
    ]
    n = 0
    for model, effort, scores in rows:
        for seed, passed in enumerate(scores):
            status = "failed" if passed == 0 else "valid"
            run = run_dict(
                f"run{n}", model=model, effort=effort, seed=seed, passed=passed, status=status,
                revision=2, public=[20.0, 55.0, 80.0 + seed],
            )  # fmt: skip
            write_run(results, run, artifacts={"transcript": transcript, "audit": '{"n": 1}\n'})
            n += 1
    write_run(results, run_dict("inv0", model="claude-y", seed=9, status="invalid", revision=2))
    write_run(results, run_dict("old0", model="old-model", passed=95, revision=1, public=[100.0]))
    write_run(results, run_dict("demo0", track="demo-test", model="scripted", passed=5))


# Expected order of the official table: (rank label, model).
EXPECTED_ORDER = [("=1", "gpt-x"), ("=1", "claude-y"), ("3", "gemini-z"), ("4", "o-mini")]


__all__ = [
    "EXPECTED_ORDER",
    "REPO",
    "build",
    "make_fixture",
    "run_dict",
    "track_dict",
    "write_registry",
    "write_run",
]
