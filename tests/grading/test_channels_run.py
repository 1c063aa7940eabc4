"""Red-team: a run publishes no time of its hidden grading finer than the grading-time bucket.

A bundle that sleeps a chosen time during its final grading (a stand-in for bits of the exam)
must find that time nowhere in what the run publishes: the result's `timings.grading_s` is a
bucket (`publish.coarse_seconds`), its `finished_at` is when the grading started, and every
line `agent.log` writes from then on carries that same stamp. The same run with a crash of a
chosen exit status publishes a fixed reason, with no status in any published file. The exact
time is in the operator log, outside the results folder.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

from grading_helpers import ORACLE, code_questions, run_spec, submit_and_promote

from toolkit.grading import secret_log
from toolkit.grading.publish import PHASE1_REASONS
from toolkit.results.model import RunResult, Timings
from toolkit.run.orchestrate import execute_run

SLEEP_S = 2.0  # long enough to stand out from the grading around it; each costs the test twice
CHANNELS = Path(__file__).resolve().parents[2] / "site" / "docs" / "security" / "channels.md"

# Sleeps in every generate() call; in the final grading's phase 2 it steers bits per byte to
# the 849.901 (every printable byte the same tiny probability); with CRASH, it exits
# with status 97 after sleeping in the grading's first batch.
SLEEPER = ORACLE.replace(
    "        def generate(self, prompts, lengths):\n",
    "        def generate(self, prompts, lengths):\n"
    "            import os, time\n"
    f"            time.sleep({SLEEP_S})\n"
    "            if {crash} and len(prompts) < 9:\n"  # the final grading (6 questions)
    "                os._exit(97)\n",
).replace(
    "            return np.full((len(contexts), 256), -np.log(256.0), dtype=np.float32)\n",
    "            row = np.full(256, np.log(1.0 / 161), dtype=np.float64)\n"
    "            row[32:127] = -849.901 * np.log(2.0)\n"
    "            return np.tile(row, (len(contexts), 1)).astype(np.float32)\n",
)


def _exam(tmp_path: Path) -> Path:
    folder = tmp_path / "exam"
    folder.mkdir()
    exam = folder / "exam.jsonl"
    lines = [json.dumps(q, sort_keys=True, separators=(",", ":")) + "\n" for q in code_questions(6)]
    exam.write_text("".join(lines))
    return exam


def _run(tmp_path: Path, crash: bool) -> tuple[RunResult, Path, float]:
    """The run's result, its folder, and seconds from its `finished_at` to when it returned."""
    spec = run_spec(
        submit_and_promote(SLEEPER.replace("{crash}", str(crash))), _exam(tmp_path), tmp_path
    )
    result = execute_run(spec)
    after = (datetime.now(UTC) - result.finished_at).total_seconds() if result.finished_at else 0
    return result, tmp_path / "results" / result.track / result.run_id, after


def _held_stamps(log: str) -> set[str]:
    """The stamps of `agent.log` from the final grading's first line on."""
    first = log.rfind("\n", 0, log.index("grading c001 on the exam")) + 1
    lines = log[first:].splitlines()
    return {m.group(1) if (m := re.match(r"\[\s*([0-9.]+)s\]", x)) else x for x in lines if x}


def test_a_sleeping_bundle_publishes_no_grading_time_and_a_clipped_bpb(tmp_path: Path) -> None:
    result, folder, after = _run(tmp_path, crash=False)
    assert result.status == "valid", result.status_reason
    assert result.score.passed == 6
    assert result.bits_per_byte == 8.0  # 849.901, clipped: no better than a guess
    assert result.timings.grading_s == 0.0  # under a minute, whatever it slept
    # finished_at is the grading's start: the sleeps (phase 1, ablation) came after it
    assert after >= 2 * SLEEP_S, after
    log = (folder.parent / result.artifacts["agent_log"]).read_text()
    assert len(_held_stamps(log)) == 1, log  # one stamp for every line of the grading on
    # nor do the files' and folders' times (a web server, a copy, a git client shows them):
    # the run folder, candidates/, the track folder, the results folder and its key list too
    assert result.finished_at is not None
    results = folder.parent.parent
    published = [
        folder.parent / f"{result.run_id}.json",
        *folder.rglob("*"),
        folder,
        folder / "candidates",
        folder.parent,
        results,
        results / "signing_keys.json",
    ]
    for path in published:
        assert path.stat().st_mtime <= result.finished_at.timestamp() + 0.01, path
    # every time the result carries is on the channels page with its bound; those it lists as
    # fixed before the grading are before it
    page = CHANNELS.read_text(encoding="utf-8")
    times = [f"timings.{name}" for name in Timings.model_fields]
    times += ["started_at", "finished_at", "submitted_at", "elapsed_s", "promoted_at", "mtime"]
    assert [t for t in times if f"`{t}`" not in page] == []
    assert result.promoted is not None
    before = [result.started_at, result.promoted.promoted_at]
    before += [c.submitted_at for c in result.candidates]
    assert all(t <= result.finished_at for t in before)
    exact = secret_log.log_path().read_text()
    assert f"final grading of {result.run_id}: seconds (exact)" in exact


def test_a_crash_with_a_chosen_status_publishes_a_fixed_reason(tmp_path: Path) -> None:
    result, folder, _ = _run(tmp_path, crash=True)
    assert result.status == "failed"
    prefix = "the promoted candidate c001 failed grading: "
    assert result.status_reason and result.status_reason.startswith(prefix)
    assert result.status_reason.removeprefix(prefix) in PHASE1_REASONS
    assert result.status_reason == prefix + "generate(): crashed: the worker died"
    published = [folder.parent / f"{result.run_id}.json"] + [
        p for p in folder.rglob("*") if p.is_file() and "candidates" not in p.parts
    ]
    for path in published:
        text = path.read_text(errors="replace")
        assert "status 97" not in text and "on batch" not in text, path
