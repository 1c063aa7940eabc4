"""A Ray host's cores shared between its runs (`node_share.py`): slot claims, the run's
environment, the host's slots, and the pre-flight's report of a host with too few cores."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from toolkit.campaign.node_share import (
    HostFacts,
    Share,
    claim_slot,
    host_slots,
    launch_environ,
    release,
    run_env,
    take_share,
)
from toolkit.sandbox.cores import CORES_ENV


def test_each_claim_gets_its_own_slot_until_released(tmp_path: Path) -> None:
    first, second = claim_slot(2, "ari_slot", tmp_path), claim_slot(2, "ari_slot", tmp_path)
    assert first is not None and second is not None
    assert {first[0], second[0]} == {0, 1}
    assert claim_slot(2, "ari_slot", tmp_path) is None  # every slot held
    assert claim_slot(2, "GPU", tmp_path) is not None  # another unit: its own slots
    os.close(first[1])
    again = claim_slot(2, "ari_slot", tmp_path)
    assert again is not None and again[0] == first[0]
    for fd in (second[1], again[1]):
        os.close(fd)


def test_a_run_that_outlives_its_task_keeps_its_slot(tmp_path: Path) -> None:
    share = take_share(1, "ari_slot", tmp_path)
    assert share.index == 0 and share.fd is not None
    assert not os.get_inheritable(share.fd)  # never passed on by accident
    run = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)"], pass_fds=(share.fd,)
    )
    try:
        release(share)  # the Ray worker is gone; its run process is not
        assert claim_slot(1, "ari_slot", tmp_path) is None
    finally:
        run.kill()
        run.wait()
    after = claim_slot(1, "ari_slot", tmp_path)
    assert after is not None
    os.close(after[1])


def test_a_slot_gets_its_share_of_the_cores(tmp_path: Path) -> None:
    cores = sorted(os.sched_getaffinity(0))
    share = take_share(len(cores), "ari_slot", tmp_path)
    assert share.cores == [cores[0]]
    assert "cores" in share.describe()
    release(share)
    crowded = take_share(len(cores) + 1, "ari_slot", tmp_path)  # more slots than cores
    assert crowded.cores is None and "every core" in crowded.describe()
    release(crowded)


def test_the_run_env_drops_rays_thread_count_not_the_operators() -> None:
    share = Share(1, 2, [1], None)
    worker = {"OMP_NUM_THREADS": "1", "PATH": "/bin"}
    env = run_env(worker, share, launched={"PATH": "/bin"})  # Ray set it in the worker
    assert "OMP_NUM_THREADS" not in env and env[CORES_ENV] == "1" and env["PATH"] == "/bin"
    kept = run_env(worker, Share(None, 3, None, None), launched=worker)  # the operator's
    assert kept["OMP_NUM_THREADS"] == "1" and CORES_ENV not in kept


def test_launch_environ_is_what_the_process_started_with() -> None:
    code = (
        "import os, json; from toolkit.campaign.node_share import launch_environ; "
        "os.environ['SET_LATER'] = '1'; e = launch_environ(); "
        "print(json.dumps([e.get('GIVEN'), e.get('SET_LATER')]))"
    )
    env = {**os.environ, "GIVEN": "yes"}
    env.pop("SET_LATER", None)
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == '["yes", null]'
    assert "PATH" in launch_environ()


def test_host_slots_count_the_hosts_alive_nodes() -> None:
    nodes = [
        {"NodeID": "a", "Alive": True, "NodeManagerHostname": "h1", "Resources": {"GPU": 2.0}},
        {"NodeID": "b", "Alive": True, "NodeManagerHostname": "h1", "Resources": {"GPU": 1.0}},
        {"NodeID": "c", "Alive": False, "NodeManagerHostname": "h1", "Resources": {"GPU": 8.0}},
        {"NodeID": "d", "Alive": True, "NodeManagerHostname": "h2", "Resources": {"GPU": 4.0}},
        {"NodeID": "e", "Alive": True, "NodeManagerHostname": "h3", "Resources": {"x": 2.5}},
    ]
    assert host_slots(nodes, "h1", "GPU", "a") == 3
    assert host_slots(nodes, "other-name", "GPU", "d") == 4  # its own node, whatever its name
    assert host_slots(nodes, "h3", "x", "e") == 2
    assert host_slots(nodes, "nowhere", "GPU", "z") == 1
    assert host_slots([], "h1", "GPU", "a") == 1


def test_a_host_with_more_slots_than_cores_is_reported() -> None:
    assert HostFacts("0123456789", "box", cores=2, slots=2).problem() is None
    problem = HostFacts("0123456789", "box", cores=2, slots=4).problem()
    assert problem is not None
    assert "01234567 (box) holds 4 slots on 2 usable core(s)" in problem
    assert "at most 2 units" in problem
