"""Campaigns on a real Ray cluster: several simulated nodes with fake GPUs on this machine.

The cluster (`ray.cluster_utils.Cluster`: a head and two worker nodes of two GPUs each, small
object stores) is made once for the module. Runs are real runs of the scripted agent on the
demo track with short budgets; faults are real too: a run process killed mid-run, a node
removed without warning.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.campaign.conftest import (
    TOOLKIT,
    key_counts,
    results_in,
    running_children,
    toolkit,
    wait_no_run_processes,
    write_campaign,
)

if os.environ.get("CI", "").lower() not in ("1", "true", "yes"):
    pytest.importorskip("ray", reason="Ray is not installed (make test installs it: .[ray])")
# In CI a missing Ray is a failure (this import raises), never a skip.
from ray.cluster_utils import Cluster

STORE = 80 * 2**20  # Ray's smallest object store
RESOURCE = "campaign_test_slot"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "num_gpus": 0,
            "object_store_memory": STORE,
            "include_dashboard": False,
            # Notice a dead node in about a second, not the default half minute.
            "_system_config": {
                "health_check_initial_delay_ms": 0,
                "health_check_period_ms": 500,
                "health_check_failure_threshold": 2,
            },
        },
    )
    for _ in range(2):
        cluster.add_node(num_cpus=1, num_gpus=2, object_store_memory=STORE)
    cluster.wait_for_nodes()
    yield cluster
    cluster.shutdown()


def _kill_first_run_of(seed: int, timeout: float = 360) -> int:
    """SIGKILL the run process of `seed` once its run has begun: an infrastructure fault.
    A run begins (its marker) once its workspace is set up: on a box loaded past its cores
    (the suite beside three training runs) that took longer than two minutes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pid, job in running_children():
            if job["seed"] == seed:
                time.sleep(1.0)  # mid-run: the agent is working
                if pid not in (p for p, _ in running_children()):
                    break  # no longer that harness: look again
                os.kill(pid, signal.SIGKILL)
                return pid
        time.sleep(0.2)
    raise AssertionError(f"the run of seed {seed} never started")


def test_campaign_on_a_cluster_runs_each_key_once_on_its_own_gpu(
    cluster: Cluster, tmp_path: Path
) -> None:
    seeds = list(range(6))
    file = write_campaign(tmp_path, seeds=seeds, budget=14)
    results = tmp_path / "results"
    started = time.monotonic()
    driver = subprocess.Popen(
        [TOOLKIT, "campaign", "run", str(file), "--engine", "ray", "--address", cluster.address],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    _kill_first_run_of(seed=0)  # its result: `invalid`, then the campaign runs it again
    out, _ = driver.communicate(timeout=600)
    took = time.monotonic() - started
    assert driver.returncode == 0, out
    runs = results_in(results)
    counts = key_counts(runs)
    # Every key has exactly one final result; seed 0 also has the invalid one, rerun.
    for seed in seeds:
        assert counts[("scripted-baseline", None, seed, "final")] == 1, (seed, counts, out)
    assert counts[("scripted-baseline", None, 0, "invalid")] == 1, (counts, out)
    assert sum(counts.values()) == len(seeds) + 1
    invalid = next(r for r in runs if r.status == "invalid")
    assert "died" in (invalid.status_reason or ""), invalid.status_reason
    assert len({r.run_id for r in runs}) == len(runs)
    # Every run was pinned to a GPU, and no GPU of a node ran two runs at once.
    assert all(r.placement and r.placement.gpu in ("0", "1") for r in runs)
    by_gpu: dict[tuple[str, str | None], list[Any]] = {}
    for r in runs:
        assert r.placement is not None and r.finished_at is not None
        by_gpu.setdefault((r.placement.node, r.placement.gpu), []).append(r)
    for slot, held in by_gpu.items():
        held.sort(key=lambda r: r.started_at)
        for before, after in itertools.pairwise(held):
            assert before.finished_at <= after.started_at, f"GPU {slot} ran two runs at once"
    assert len({node for node, _ in by_gpu}) == 2, "both worker nodes took runs"
    valid = toolkit("runs", "validate", str(results))
    assert valid.returncode == 0, valid.stdout + valid.stderr
    assert "scripted-baseline" in out  # the leaderboard table at the end
    assert wait_no_run_processes() == []
    print(f"6-key Ray campaign with one injected fault: {took:.1f}s")


def test_a_node_lost_mid_run_is_retried_elsewhere_and_written_once(
    cluster: Cluster, tmp_path: Path
) -> None:
    # Only the doomed node offers the resource this campaign asks for, so the run starts there.
    doomed = cluster.add_node(num_cpus=1, resources={RESOURCE: 1}, object_store_memory=STORE)
    cluster.wait_for_nodes()
    file = write_campaign(tmp_path, seeds=[0], budget=20)
    driver = subprocess.Popen(
        [
            TOOLKIT, "campaign", "run", str(file), "--engine", "ray",
            "--address", cluster.address, "--ray-resource", RESOURCE,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not running_children():
        assert time.monotonic() < deadline, "the run never started"
        time.sleep(0.2)
    time.sleep(1.0)
    spare = cluster.add_node(num_cpus=1, resources={RESOURCE: 1}, object_store_memory=STORE)
    cluster.remove_node(doomed, allow_graceful=False)
    out, _ = driver.communicate(timeout=600)
    assert driver.returncode == 0, out
    runs = results_in(tmp_path / "results")
    assert len(runs) == 1, out  # the lost try left nothing behind; the retry wrote once
    assert runs[0].status in ("valid", "failed"), runs[0].status_reason
    assert runs[0].placement is not None and runs[0].placement.node == spare.node_id
    assert wait_no_run_processes() == [], "the lost node's run left processes behind"
    valid = toolkit("runs", "validate", str(tmp_path / "results"))
    assert valid.returncode == 0, valid.stdout + valid.stderr
    cluster.remove_node(spare)


def test_failed_runs_are_final_and_both_engines_make_the_same_keys(
    cluster: Cluster, tmp_path: Path
) -> None:
    # A 10 s budget leaves the scripted agent no time to train: every run ends `failed` fast.
    models = ("scripted-baseline", "scripted-other")
    on_ray = write_campaign(tmp_path / "ray", seeds=[0, 1, 2], budget=10, models=models)
    local = write_campaign(tmp_path / "local", seeds=[0, 1, 2], budget=10, models=models)
    ray_run = toolkit(
        "campaign", "run", str(on_ray), "--engine", "ray", "--address", cluster.address
    )
    assert ray_run.returncode == 0, ray_run.stdout + ray_run.stderr
    # This host holds the cluster's four fake GPUs: fewer cores than that, and the start says so.
    crowded = "4 slots on" in ray_run.stdout + ray_run.stderr
    assert crowded == (len(os.sched_getaffinity(0)) < 4), ray_run.stdout + ray_run.stderr
    # Two CPU slots: this host has no GPU for `--gpus` (refused: test_campaign_gpu_ids.py).
    local_run = toolkit("campaign", "run", str(local), "--slots", "2")
    assert local_run.returncode == 0, local_run.stdout + local_run.stderr
    ray_runs, local_runs = (
        results_in(tmp_path / "ray/results"),
        results_in(tmp_path / "local/results"),
    )
    assert {r.status for r in ray_runs + local_runs} == {"failed"}
    assert len(ray_runs) == len(local_runs) == 6  # failed runs are never retried
    assert key_counts(ray_runs) == key_counts(local_runs)
    assert {r.placement.gpu for r in local_runs if r.placement} <= {None}
    # The pin reached the run's runner sandbox (RunSpec.gpu) on the cluster's fake GPUs.
    assert all("runner:gpu-pinned" in r.config.isolation for r in ray_runs)
    # Started again, the campaign has nothing left to do.
    again = toolkit("campaign", "run", str(local), "--slots", "2")
    assert again.returncode == 0, again.stdout + again.stderr
    assert len(results_in(tmp_path / "local/results")) == 6
    assert "done 6/6" in again.stderr


SHARE = "campaign_share_slot"
PROBE_RUN = """
import json, os, sys, time
from toolkit.sandbox.cores import pin_from_env, thread_env
pinned = pin_from_env()  # as the real run process does, first thing
facts = dict(
    pinned=pinned,
    affinity=sorted(os.sched_getaffinity(0)),
    omp=os.environ.get("OMP_NUM_THREADS"),
    sandbox_threads=int(thread_env(None)["OMP_NUM_THREADS"]),
    start=time.time(),
)
# Both runs hold their share at once: each waits for the other's start (a loaded box may start
# the second worker seconds after the first), then a moment more.
open(os.path.join({out!r}, f"started-{{os.getpid()}}"), "w").close()
deadline = time.time() + 90
while len([n for n in os.listdir({out!r}) if n.startswith("started-")]) < 2:
    assert time.time() < deadline, "the other run never started"
    time.sleep(0.1)
time.sleep(0.5)
facts["end"] = time.time()
with open(os.path.join({out!r}, f"{{os.getpid()}}.json"), "w") as f:
    json.dump(facts, f)
"""


def _probe_command(script: str, job_file: Path, report_file: Path) -> list[str]:
    return [sys.executable, script, str(job_file), str(report_file)]


def test_runs_sharing_a_ray_host_each_get_their_own_cores(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a grading's speed under Ray depends on (issue: four times slower than locally):
    two runs on one host at once each pinned to their own cores, their sandboxes' thread pools
    sized to that share, and no OMP_NUM_THREADS=1 of Ray's in the run process."""
    from ray import cloudpickle

    from toolkit.campaign.job import make_job
    from toolkit.campaign.plan import RunKey
    from toolkit.campaign.ray_engine import RayEngine
    from toolkit.campaign.setup import open_campaign

    cores = len(os.sched_getaffinity(0))
    # The node as an operator starts it: no thread count of the suite's (tests/conftest.py), so
    # that Ray's own OMP_NUM_THREADS and the sandboxes' sizing are what the run gets.
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "ARI_SANDBOX_THREADS"):
        monkeypatch.delenv(name, raising=False)
    node = cluster.add_node(num_cpus=1, resources={SHARE: 2}, object_store_memory=STORE)
    over = cluster.add_node(
        num_cpus=1, resources={"over_slot": cores + 1}, object_store_memory=STORE
    )
    cluster.wait_for_nodes()
    out = tmp_path / "facts"
    out.mkdir()
    script = tmp_path / "probe_run.py"
    script.write_text(PROBE_RUN.format(out=str(out)))
    campaign = open_campaign(write_campaign(tmp_path, seeds=[0, 1], budget=10))
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers get the command
    engine = RayEngine(
        address=cluster.address,
        results_dir=campaign.results_dir,
        exam=b"{}",
        resource=SHARE,
        command=functools.partial(_probe_command, str(script)),
    )
    try:
        assert (engine.host_problems() == []) == (cores >= 2)  # two slots: a core each
        engine.unit = "over_slot"
        problems = engine.host_problems()
        assert len(problems) == 1 and f"{cores + 1} slots on {cores} usable core" in problems[0]
        engine.unit = SHARE
        for seed in (0, 1):
            key = RunKey(campaign.track.id, "scripted-baseline", None, seed)
            engine.start(
                make_job(
                    campaign.file, campaign.track, key, attempt=1, results_dir=campaign.results_dir
                )
            )
        finished: list[Any] = []
        deadline = time.monotonic() + 120
        while len(finished) < 2 and time.monotonic() < deadline:
            finished += engine.wait(1.0)
    finally:
        engine.close()
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
        cluster.remove_node(node)
        cluster.remove_node(over)
    facts = [json.loads(p.read_text()) for p in out.glob("*.json")]  # not the start marks
    assert len(facts) == 2, finished
    first, second = sorted(facts, key=lambda f: f["start"])
    assert second["start"] < first["end"], "the two runs did not hold the host at once"
    for f in facts:
        assert f["omp"] is None, "Ray's own thread count (1) reached the run process"
        if cores >= 2:
            assert f["pinned"] and f["affinity"] == f["pinned"]
            assert f["sandbox_threads"] == len(f["pinned"])
    if cores >= 2:
        assert not set(first["pinned"]) & set(second["pinned"]), facts
        assert len(first["pinned"]) + len(second["pinned"]) == cores
