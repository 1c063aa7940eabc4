"""cgroup v2 in the local backend, on a fake cgroup2 tree (this machine is cgroup v1).

The fake is a temporary folder laid out like /sys/fs/cgroup on a pure v2 host: the interface
files are plain files, so a write replaces their content and nothing is enforced. What is
checked is what the backend writes and reads: the probe's delegated parent and harness leaf,
each tree's limit files, `cgroup.kill`, and removal only once `cgroup.events` says
`populated 0`. tests/sandbox/test_cgroup2_real.py checks the real thing on a v2 host.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import threading
import time
from pathlib import Path

import pytest

from toolkit.sandbox import create_sandbox
from toolkit.sandbox.base import TEARDOWN_ENV, Limits
from toolkit.sandbox.local import LocalSandbox
from toolkit.sandbox.local import host as local_host
from toolkit.sandbox.local import process as process_module

OWN = "system.slice/ari.service"


def fake_tree(tmp_path: Path, own: str = OWN, offered: str = "cpu io memory pids") -> Path:
    """A v2 tree whose `own` cgroup holds this process and offers `offered`."""
    root = tmp_path / "cgroup"
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpuset cpu io memory hugetlb pids rdma misc\n")
    (root / "cgroup.subtree_control").write_text("cpu io memory pids\n")
    (root / "cgroup.procs").write_text("")
    here = root / own
    here.mkdir(parents=True)
    (here / "cgroup.controllers").write_text(offered + "\n")
    (here / "cgroup.subtree_control").write_text("")
    (here / "cgroup.procs").write_text(f"{os.getpid()}\n")
    (here / "cgroup.events").write_text("populated 1\nfrozen 0\n")
    (tmp_path / "self-cgroup").write_text(f"0::/{own}\n")
    return root


def v2_support(parent: Path) -> local_host.HostSupport:
    return dataclasses.replace(
        local_host.probe(),
        pids_parent=parent,
        memory_parent=parent,
        cpu_parent=parent,
        cgroup2=True,
        cgroups=None,  # not this host's layout (on a v2 host, its top cgroup is real)
    )


def test_probe_finds_v2_and_the_delegated_parent(tmp_path: Path) -> None:
    root = fake_tree(tmp_path)
    assert local_host.is_cgroup2(root)
    layout = local_host.probe_cgroups(False, root, tmp_path / "self-cgroup")
    parent = root / OWN / "ari-sandboxes"
    assert layout.cgroup2 and layout.kind == "delegated"
    assert layout.pids == layout.memory == layout.cpu == parent
    # No internal processes: ours moved to the harness leaf before controllers were enabled.
    assert (root / OWN / "ari-harness" / "cgroup.procs").read_text() == str(os.getpid())
    enabled = set((root / OWN / "cgroup.subtree_control").read_text().replace("+", "").split())
    assert enabled == {"memory", "pids", "cpu"}
    assert "+memory" in (parent / "cgroup.subtree_control").read_text()


def test_a_process_of_the_harness_leaf_uses_the_cgroup_above(tmp_path: Path) -> None:
    root = fake_tree(tmp_path)
    (root / OWN / "ari-harness").mkdir()
    (tmp_path / "self-cgroup").write_text(f"0::/{OWN}/ari-harness\n")
    layout = local_host.probe_cgroups(True, root, tmp_path / "self-cgroup")
    assert layout.cgroup2 and layout.memory == root / OWN / "ari-sandboxes"
    assert not (root / OWN / "ari-harness" / "ari-harness").exists()


@pytest.mark.parametrize(
    "offered, self_cgroup, kind",
    [
        # memory and pids not delegated to our cgroup: the root's own (tests/sandbox/
        # test_cgroup_layouts.py checks that layout on a tree with the kernel's rules)
        ("cpu io", f"0::/{OWN}\n", "top"),
        ("cpu io memory pids", "12:pids:/x\n", "none"),  # no unified line for this process
        ("cpu io memory pids", "0::/elsewhere\n", "none"),  # our cgroup is not in this tree
    ],
)
def test_without_delegation_it_falls_back(
    tmp_path: Path, offered: str, self_cgroup: str, kind: str
) -> None:
    root = fake_tree(tmp_path, offered=offered)
    (tmp_path / "self-cgroup").write_text(self_cgroup)
    layout = local_host.probe_cgroups(True, root, tmp_path / "self-cgroup")
    assert layout.kind == kind
    assert not (root / OWN / "ari-sandboxes").exists()
    if kind == "none":
        assert layout.pids is None and layout.memory is None


def test_a_hybrid_or_v1_tree_is_not_v2(tmp_path: Path) -> None:
    root = fake_tree(tmp_path)
    (root / "memory").mkdir()  # a v1 hierarchy beside the unified one: hybrid
    assert not local_host.is_cgroup2(root)
    layout = local_host.probe_cgroups(False, root, tmp_path / "self-cgroup")
    assert layout.kind == "none" and layout.memory is None


def test_a_tree_gets_its_limit_files(tmp_path: Path) -> None:
    parent = tmp_path / "ari-sandboxes"
    parent.mkdir()
    cgroups = local_host.ProcessCgroups(v2_support(parent), 256 << 20, 64, 1.5)
    [directory] = cgroups.dirs
    assert directory.parent == parent
    files = {f: (directory / f).read_text() for f in os.listdir(directory)}
    assert files == {
        "memory.max": str(256 << 20),
        "memory.swap.max": "0",
        "pids.max": "64",
        "cpu.max": "150000 100000",
    }
    assert cgroups.procs_files == [str(directory / "cgroup.procs")]


def test_no_limits_no_cgroup(tmp_path: Path) -> None:
    cgroups = local_host.ProcessCgroups(v2_support(tmp_path), None, None, None)
    assert cgroups.dirs == [] and os.listdir(tmp_path) == []


def _when(condition: Path, text: str, then: Path, write: str) -> threading.Thread:
    """A kernel stand-in: once `condition` holds `text`, write `write` to `then`."""

    def act() -> None:
        end = time.monotonic() + 30
        while time.monotonic() < end:
            if condition.exists() and condition.read_text() == text:
                then.write_text(write)
                return
            time.sleep(0.01)

    thread = threading.Thread(target=act, daemon=True)
    thread.start()
    return thread


def test_kill_writes_cgroup_kill_and_waits_until_empty(tmp_path: Path) -> None:
    cgroups = local_host.ProcessCgroups(v2_support(tmp_path), 1 << 30, None)
    [directory] = cgroups.dirs
    events = directory / "cgroup.events"
    events.write_text("populated 1\nfrozen 0\n")
    assert not cgroups.kill_all(0.2)  # still populated: not reported gone
    assert (directory / "cgroup.kill").read_text() == "1"
    (directory / "cgroup.kill").unlink()
    _when(directory / "cgroup.kill", "1", events, "populated 0\nfrozen 0\n")
    assert cgroups.kill_all(10.0)


@pytest.fixture
def kernel_rmdir(monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[str, str]]:
    """rmdir as cgroupfs does it: a cgroup's interface files do not keep it. Returns the
    files each removed cgroup had, by its name."""
    real = pathlib.Path.rmdir
    removed: dict[str, dict[str, str]] = {}

    def rmdir(self: Path) -> None:
        if self.name.startswith("ari-sandbox-"):
            removed[self.name] = {}
            for child in self.iterdir():
                removed[self.name][child.name] = child.read_text()
                child.unlink()
        real(self)

    monkeypatch.setattr(pathlib.Path, "rmdir", rmdir)
    return removed


@pytest.mark.usefixtures("kernel_rmdir")
def test_removal_waits_for_populated_0(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TEARDOWN_ENV, "20")
    cgroups = local_host.ProcessCgroups(v2_support(tmp_path), 1 << 30, 10)
    [directory] = cgroups.dirs
    events = directory / "cgroup.events"
    events.write_text("populated 1\nfrozen 0\n")
    cgroups.remove(wait=False)
    assert directory.is_dir() and cgroups.dirs == [directory]  # busy: left for later
    flag = tmp_path / "flag"
    flag.write_text("")
    _when(flag, "go", events, "populated 0\nfrozen 0\n")
    flag.write_text("go")
    cgroups.remove(wait=True)
    assert not directory.exists() and cgroups.dirs == []


@pytest.mark.usefixtures("kernel_rmdir")
def test_removal_gives_up_at_the_teardown_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TEARDOWN_ENV, "0.3")
    cgroups = local_host.ProcessCgroups(v2_support(tmp_path), 1 << 30, 10)
    [directory] = cgroups.dirs
    (directory / "cgroup.events").write_text("populated 1\n")
    cgroups.remove(wait=True)  # never rmdir'd while populated (the kernel says EBUSY)
    assert directory.is_dir()


def test_a_sandbox_records_cgroup2_and_no_address_space_rlimit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kernel_rmdir: dict[str, dict[str, str]]
) -> None:
    parent = tmp_path / "ari-sandboxes"
    parent.mkdir()
    support = v2_support(parent)
    monkeypatch.setattr(local_host, "probe", lambda: support)
    root = tmp_path / "root"
    root.mkdir()
    limits = Limits(memory_bytes=1 << 30, max_processes=500, cpus=1.0)
    with create_sandbox("local", root=root, limits=limits) as box:
        assert isinstance(box, LocalSandbox)
        assert {"cgroup2", "cgroup-memory", "cgroup-pids", "cgroup-cpu"} <= set(box.isolation)
        assert "memory-per-tree" not in box.not_isolated
        assert "as" not in box._rlimits() and "nproc" not in box._rlimits()
        running = box.start(["sleep", "60"])
        assert isinstance(running, process_module.LocalProcess)
        [directory] = running._cgroups.dirs
        assert (directory / "cgroup.procs").read_text() == "0"  # the launcher joined it
        assert (directory / "memory.max").read_text() == str(1 << 30)
        running.kill()
        assert running.poll() is not None
    assert not directory.exists()  # gone with the tree
    assert kernel_rmdir[directory.name]["cgroup.kill"] == "1"


def test_no_address_space_rlimit_where_cuda_may_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    weak = dataclasses.replace(
        local_host.probe(), memory_parent=None, pids_parent=None, cgroup2=False
    )
    monkeypatch.setattr(local_host, "probe", lambda: weak)
    monkeypatch.setattr(LocalSandbox, "_may_use_cuda", True)
    root = tmp_path / "root"
    root.mkdir()
    with create_sandbox("local", root=root, limits=Limits(memory_bytes=1 << 30)) as box:
        assert isinstance(box, LocalSandbox)
        assert "as" not in box._rlimits()
        assert {"memory-per-tree", "memory"} <= set(box.not_isolated)
        assert "cgroup2" not in box.isolation
