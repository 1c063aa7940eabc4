"""Thread pools sized to a tree's cores, and slots pinned to their share of the box.

The problem measured: two gradings at once on a 2-core box took ten times as long each, with or
without a CPU quota, because torch and BLAS started a pool of every core's size in each.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from toolkit.sandbox import Limits, create_sandbox
from toolkit.sandbox.cores import (
    CORES_ENV,
    THREAD_VARS,
    THREADS_ENV,
    pin_from_env,
    slot_cores,
    thread_count,
    thread_env,
)

DOCKER_BACKEND = True
SHOW = "import os; print(os.environ.get('OMP_NUM_THREADS'), os.environ.get('MKL_NUM_THREADS'))"


@pytest.fixture(autouse=True)
def _sized_by_the_toolkit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite forces one thread per tree (tests/conftest.py); these tests check the sizing
    an operator gets without that override."""
    monkeypatch.delenv(THREADS_ENV, raising=False)


def test_slots_split_the_cores_evenly() -> None:
    cores = list(range(8))
    assert [slot_cores(i, 2, cores) for i in range(2)] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert [slot_cores(i, 3, cores) for i in range(3)] == [[0, 1, 2], [3, 4, 5], [6, 7]]
    assert slot_cores(0, 3, [0, 1]) is None  # fewer cores than slots: nobody is pinned
    assert slot_cores(2, 2, cores) is None
    every = [c for i in range(3) for c in slot_cores(i, 3, [1, 3, 5, 7, 9]) or []]
    assert every == [1, 3, 5, 7, 9]  # each core once, none left out


def test_thread_count_follows_quota_and_affinity() -> None:
    cores = len(os.sched_getaffinity(0))
    assert thread_count(None) == cores
    assert thread_count(0.5) == 1
    assert thread_count(1.0) == 1
    assert thread_count(1.2) == min(2, cores)
    assert thread_count(10_000) == cores
    assert set(thread_env(1)) == set(THREAD_VARS)


@pytest.mark.parametrize("backend", ["local", "docker"])
def test_a_tree_under_a_quota_gets_that_many_threads(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if backend == "docker":
        request.getfixturevalue("docker_engine")
    root = tmp_path / "root"
    root.mkdir()
    python = sys.executable if backend == "local" else "python3"
    with create_sandbox(backend, root=root, limits=Limits(cpus=1)) as box:
        done = box.exec([python, "-c", SHOW], timeout=60)
        assert done.stdout.split() == [b"1", b"1"], done
        # A caller's own setting wins (an agent may size its own pools).
        mine = box.exec([python, "-c", SHOW], env={"OMP_NUM_THREADS": "3"}, timeout=60)
        assert mine.stdout.split() == [b"3", b"1"], mine


def test_torch_in_a_sandbox_uses_the_quota_not_the_box() -> None:
    code = "import torch; print(torch.get_num_threads())"
    root = Path(os.environ["ARI_HOME"]).parent / "torch-root"
    root.mkdir()
    with create_sandbox("local", root=root, limits=Limits(cpus=1)) as box:
        done = box.exec([sys.executable, "-c", code], timeout=120)
    assert done.stdout.strip() == b"1", done


def test_a_run_process_pins_itself_to_its_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    mine = sorted(os.sched_getaffinity(0))
    code = (
        "import os; from toolkit.sandbox.cores import pin_from_env; "
        "print(pin_from_env(), sorted(os.sched_getaffinity(0)))"
    )
    env = {**os.environ, CORES_ENV: str(mine[-1])}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == f"[{mine[-1]}] [{mine[-1]}]", out.stderr
    monkeypatch.delenv(CORES_ENV, raising=False)
    assert pin_from_env() is None  # nothing asked: nothing changed
    assert sorted(os.sched_getaffinity(0)) == mine


def test_the_operator_can_force_a_thread_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(THREADS_ENV, "7")
    assert thread_count(1.0) == 7 and thread_env(None)["OMP_NUM_THREADS"] == "7"
    monkeypatch.setenv(THREADS_ENV, "nonsense")
    assert thread_count(1.0) == 1
