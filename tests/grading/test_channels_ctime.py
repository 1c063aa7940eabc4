"""Issue #50, item 6: a hidden grading's length does not show in the published files' ctimes.

mtimes are set back to `finished_at` (the grading's start), but a file's ctime cannot be set:
every write, and the setting of the mtime itself, makes it "now". Published at the grading's
end, every file and folder had ctime = `finished_at` + the exact grading time (23.76 s against
3.86 s, to the 10 ms, kept by `tar --format=posix`). So a run publishes at the end of the
published time bucket of its grading (`publish.bucket_end`): a quick and a slow grading in one
bucket publish at the same moment after their start.

The bucket is shortened here (an edge at `EDGE_S` instead of a minute) so that the test waits
seconds, not minutes; the two bundles sleep for different times in the same bucket.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from grading_helpers import ORACLE, code_questions, run_spec, submit_and_promote

from toolkit.grading import publish
from toolkit.results.model import RunResult
from toolkit.run.final_grading import WAIT_ENV
from toolkit.run.orchestrate import execute_run

EDGE_S = 25.0
"""The first bucket's end, shortened from a minute: twice the slow grading on a loaded box."""
SLEEPS_S = (0.1, 3.0)
"""What each bundle sleeps in every generate() of its final grading (phase 1 and the weights
ablation): about a 4 s grading against a 10 s one (13.2 s on a loaded box), far more apart
than `SLACK_S`. (8 s sleeps and a 45-s edge, the issue's pair, held a worker 45 s.)"""
SLACK_S = 3.0
"""Publishing itself (hashing, signing, writing) after the bucket's end: the same work for
both runs, whatever the bundle did, on a box other jobs load."""


def _sleeper(seconds: float) -> str:
    return ORACLE.replace(
        "        def generate(self, prompts, lengths):\n",
        "        def generate(self, prompts, lengths):\n"
        "            import time\n"
        f"            time.sleep({seconds} if len(prompts) < 9 else 0)\n",  # the final grading
    )


def _published(result: RunResult, results: Path) -> list[Path]:
    folder = results / result.track / result.run_id
    return [
        folder.parent / f"{result.run_id}.json",
        *folder.rglob("*"),
        folder,
        folder.parent,
        results,
        results / "signing_keys.json",
    ]


def _offsets(tmp_path: Path, seconds: float) -> tuple[float, float, RunResult]:
    """Seconds from `finished_at` to the earliest and the latest ctime of what the run
    published after it."""
    exam = tmp_path / "exam" / "exam.jsonl"
    exam.parent.mkdir(parents=True)
    lines = [json.dumps(q, sort_keys=True, separators=(",", ":")) + "\n" for q in code_questions(6)]
    exam.write_text("".join(lines))
    result = execute_run(run_spec(submit_and_promote(_sleeper(seconds)), exam, tmp_path))
    assert result.status == "valid", result.status_reason
    assert result.finished_at is not None
    start = result.finished_at.timestamp()
    ctimes = [
        os.stat(p, follow_symlinks=False).st_ctime - start
        for p in _published(result, tmp_path / "results")
    ]
    later = [c for c in ctimes if c >= 0]  # one changed before the grading tells nothing of it
    return min(later), max(later), result


def test_ctimes_tell_the_bucket_not_the_grading_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(WAIT_ENV, "bucket")
    monkeypatch.setattr(publish, "TIME_EDGES_S", (0.0, EDGE_S, 600.0))
    # The two runs at once (each waits for the same bucket's end: one wait, not two).
    with ThreadPoolExecutor(max_workers=2) as pool:
        quick_run = pool.submit(_offsets, tmp_path / "quick", SLEEPS_S[0])
        slow_run = pool.submit(_offsets, tmp_path / "slow", SLEEPS_S[1])
        quick, slow = quick_run.result(), slow_run.result()
    for first, last, result in (quick, slow):
        assert result.timings.grading_s == 0.0  # both in the first bucket
        assert "ctime-bucketed" in result.config.isolation
        # nothing published before the bucket's end, everything just after it
        assert EDGE_S <= first <= last <= EDGE_S + SLACK_S, (first, last)
    # Without the wait, the earliest ctimes lay about 4 s and 20 s after the start (13.2 s for
    # a 3 s sleep on a loaded box): the grading's length.
    assert abs(quick[0] - slow[0]) < SLACK_S, (quick, slow)
