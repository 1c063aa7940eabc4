"""The local engine: a killed campaign resumes with only the missing runs; claims across
processes; plan before and after."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.campaign.conftest import (
    TOOLKIT,
    key_counts,
    results_in,
    running_children,
    toolkit,
    wait_no_run_processes,
    write_campaign,
)
from toolkit.campaign.claims import Claims
from toolkit.campaign.plan import RunKey


def _finals(results: Path) -> dict[tuple[str, int], str]:
    """(model, seed) -> run id of its final result."""
    return {(r.model, r.seed): r.run_id for r in results_in(results) if r.status != "invalid"}


def test_a_killed_campaign_resumes_with_only_the_missing_runs(tmp_path: Path) -> None:
    seeds = [0, 1]
    file = write_campaign(tmp_path, seeds=seeds, budget=14)
    results = tmp_path / "results"
    driver = subprocess.Popen(
        [TOOLKIT, "campaign", "run", str(file), "--slots", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 300
    # Kill the driver while a run is in flight, once a key is done. The run in flight is one
    # of a key still missing: the finished key's harness writes its result a moment before it
    # clears its marker, and a kill in that moment would leave no run in flight.
    while not (finals := _finals(results)) or not any(
        (job["model"], job["seed"]) not in finals for _, job in running_children()
    ):
        assert driver.poll() is None and time.monotonic() < deadline, "the campaign stopped"
        time.sleep(0.05)
    time.sleep(1.0)  # the agent is at work
    os.kill(driver.pid, signal.SIGKILL)  # the driver only: its run process is on its own
    driver.wait()
    done_before = _finals(results)
    assert len(done_before) == 1
    # Started again at once: the run that was in flight still holds its key's claim until it
    # has stopped (and recorded itself invalid); the new campaign waits for it, then does only
    # what is missing.
    again = toolkit("campaign", "run", str(file), "--slots", "1")
    assert again.returncode == 0, again.stdout + again.stderr
    runs = results_in(results)
    counts = key_counts(runs)
    for seed in seeds:
        assert counts[("scripted-baseline", None, seed, "final")] == 1, counts
    finals = _finals(results)
    for key, run_id in done_before.items():
        assert finals[key] == run_id  # done before the kill: not done again
    invalid = [r for r in runs if r.status == "invalid"]
    assert all((r.model, r.seed) not in done_before for r in invalid)
    # The run in flight at the kill stopped itself and was recorded invalid, then redone.
    assert len(invalid) == 1, [r.status_reason for r in invalid]
    assert "interrupted" in (invalid[0].status_reason or ""), invalid[0].status_reason
    assert len(runs) == len(seeds) + 1
    assert wait_no_run_processes() == []


def test_plan_shows_states_and_json(tmp_path: Path) -> None:
    file = write_campaign(tmp_path, seeds=[0, 1], budget=10, cpus_per_run=0.9)
    plan = toolkit("campaign", "plan", str(file), "--format", "json")
    assert plan.returncode == 0, plan.stderr
    assert [(k["seed"], k["state"]) for k in json.loads(plan.stdout)] == [
        (0, "missing"),
        (1, "missing"),
    ]
    run = toolkit("campaign", "run", str(file), "--slots", "2")
    assert run.returncode == 0, run.stdout + run.stderr
    # Two runs share the box: each ran under its CPU quota, recorded where it ran.
    assert [r.placement and r.placement.cpus for r in results_in(tmp_path / "results")] == [0.9] * 2
    plan = toolkit("campaign", "plan", str(file), "--format", "json")
    assert {k["state"] for k in json.loads(plan.stdout)} == {"failed"}
    table = toolkit("campaign", "plan", str(file))
    assert table.returncode == 0 and "2 failed" in table.stdout
    # Another budget is another campaign: these results do not count for it.
    other = toolkit("campaign", "plan", str(file), "--budget", "12", "--format", "json")
    assert {k["state"] for k in json.loads(other.stdout)} == {"missing"}


def test_a_models_max_concurrent_holds_whatever_the_free_slots(tmp_path: Path) -> None:
    """Two slots, two seeds of one model capped at one run at a time: the runs never overlap
    (without the cap they would run side by side)."""
    file = write_campaign(tmp_path, seeds=[0, 1], budget=10)
    file.write_text(file.read_text() + "max_concurrent = 1\n")  # the (last) model's entry
    run = toolkit("campaign", "run", str(file), "--slots", "2")
    assert run.returncode == 0, run.stdout + run.stderr
    runs = sorted(results_in(tmp_path / "results"), key=lambda r: r.started_at)
    assert [r.seed for r in runs] == [0, 1]
    assert runs[0].finished_at is not None and runs[0].finished_at <= runs[1].started_at


def test_a_claim_excludes_other_processes_until_its_holder_dies(tmp_path: Path) -> None:
    key = RunKey("demo-cpu-3", "scripted-baseline", None, 0)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from pathlib import Path\n"
            "from toolkit.campaign.claims import Claims\n"
            "from toolkit.campaign.plan import RunKey\n"
            "c = Claims(Path(sys.argv[1]))\n"
            "assert c.claim(RunKey('demo-cpu-3', 'scripted-baseline', None, 0))\n"
            "print('held', flush=True)\n"
            "time.sleep(60)\n",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    claims = Claims(tmp_path)
    assert not claims.claim(key)  # held by the other process
    assert claims.claim(RunKey("demo-cpu-3", "scripted-baseline", None, 1))  # another key is free
    holder.kill()
    holder.wait()
    assert claims.claim(key)  # the kernel dropped the dead holder's lock
    assert not Claims(tmp_path).claim(key)  # and this process now excludes others
    claims.release_all()
