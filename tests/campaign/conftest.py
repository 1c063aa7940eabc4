"""Campaign tests: campaign files in a temporary folder, the `toolkit` command, process checks.

Runs are real (the scripted agent on the demo track, short budgets), so the state folder is the
session's (tests/conftest.py): the corpus and the exams are prepared once for all of them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from toolkit.results.model import RunResult, load_run
from toolkit.run.recovery import process_start

REPO = Path(__file__).resolve().parents[2]
TOOLKIT = str(Path(sys.executable).parent / "toolkit")
CHILD_MODULE = "toolkit.campaign.child"


def write_campaign(
    folder: Path,
    *,
    seeds: list[int],
    budget: float,
    models: tuple[str, ...] = ("scripted-baseline",),
    attempts: int = 3,
    cpus_per_run: float | None = None,
) -> Path:
    """A campaign of the scripted agent on the demo track, its results folder beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    results = folder / "results"
    results.mkdir(exist_ok=True)
    shutil.copy(REPO / "results" / "tracks.json", results / "tracks.json")
    lines = [
        'track = "demo-cpu-3"',
        'agent = "scripted"',
        f"seeds = {json.dumps(seeds)}",
        f"budget_s = {budget}",
        f"attempts = {attempts}",
        'results = "results"',
    ]
    lines += [f"cpus_per_run = {cpus_per_run}"] if cpus_per_run is not None else []
    lines += [f'\n[[models]]\nname = "{m}"' for m in models]
    path = folder / "campaign.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def toolkit(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TOOLKIT, *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def results_in(results: Path) -> list[RunResult]:
    return [load_run(p) for p in sorted(results.glob("*/*.json"))]


def key_counts(results: list[RunResult]) -> Counter[tuple[str, str | None, int, str]]:
    """(model, effort, seed, final|invalid) -> how many results."""
    return Counter(
        (r.model, r.effort, r.seed, "invalid" if r.status == "invalid" else "final")
        for r in results
    )


def _cmdline(pid: str) -> str:
    try:
        return (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return ""


def _cwd(pid: str) -> Path | None:
    try:
        return Path(os.readlink(f"/proc/{pid}/cwd"))
    except OSError:
        return None


def run_processes() -> list[str]:
    """Run processes of this session, and anything working in one of its run workspaces."""
    home = Path(os.environ["ARI_HOME"]).resolve()
    runs = home / "runs"
    found = []
    for pid in (e for e in os.listdir("/proc") if e.isdigit()):
        line = _cmdline(pid)
        cwd = _cwd(pid)
        ours = CHILD_MODULE in line and str(home) in line
        in_run = cwd is not None and (runs == cwd or runs in cwd.parents)
        if ours or in_run:
            found.append(f"{pid}: {line[:200]}")
    return found


def wait_no_run_processes(timeout: float = 20.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while True:
        left = run_processes()
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def running_children() -> list[tuple[int, dict[str, object]]]:
    """(pid, job) of every live run process of this session whose run has begun.

    Only the harness itself counts: the pid and start time its `RUNNING` marker names. A
    process the harness has just forked shows the same command line until it execs (the
    sandbox launcher, grading), and a test that SIGKILLs one of those instead of the harness
    injects no infrastructure fault at all (CI saw exactly that: no `invalid` result).
    """
    home = Path(os.environ["ARI_HOME"]).resolve()
    found = []
    for pid in (e for e in os.listdir("/proc") if e.isdigit()):
        parts = _cmdline(pid).split()
        if CHILD_MODULE not in parts or len(parts) < 2:
            continue
        job_file = Path(parts[parts.index(CHILD_MODULE) + 1])
        try:
            job = json.loads(job_file.read_text())
            marker = json.loads(
                (home / "runs" / str(job.get("run_id")) / "harness" / "RUNNING").read_text()
            )
        except (OSError, ValueError):
            continue
        if marker.get("pid") == int(pid) and process_start(int(pid)) == marker.get("pid_start"):
            found.append((int(pid), job))
    return found
