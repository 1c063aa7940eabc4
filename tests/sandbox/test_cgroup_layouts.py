"""Where the local backend puts its trees' cgroups on a cgroup-v2 host, one test per layout.

On a fake cgroupfs (`fake_cgroupfs.py`: the kernel's rules for mkdir, rmdir,
`cgroup.subtree_control` and `cgroup.procs`, every write logged): a delegated subtree of our
own; root in a cgroup whose parent passes no cpu and pids down (the GPU server of issue 26:
the toolkit's own top-level cgroup); a user with no write access (refused, with the reason);
an ancestor that holds processes (the no-internal-processes rule). Each checks exactly which
cgroups were written. The same layout on a real kernel: tests/sandbox/test_cgroup2_kernel.py.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from tests.sandbox.fake_cgroupfs import FakeCgroupfs
from toolkit.sandbox.local import cgroups as layouts
from toolkit.sandbox.local import host as local_host

GPU_HOST = "cpuset cpu io memory hugetlb pids"
ME = os.getpid()
OTHER = 4242  # another process of our own cgroup (a shell, an agent of the host)


def _self(tmp_path: Path, own: str) -> Path:
    file = tmp_path / "self-cgroup"
    file.write_text(f"0::/{own}\n")
    return file


def _support(layout: layouts.CgroupLayout) -> local_host.HostSupport:
    return local_host.HostSupport(
        namespaces=True,
        userns=False,
        is_root=True,
        pids_parent=layout.pids,
        memory_parent=layout.memory,
        cpu_parent=layout.cpu,
        cgroup2=layout.cgroup2,
        cgroups=layout,
    )


@pytest.fixture
def fs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeCgroupfs:
    return FakeCgroupfs(tmp_path / "cgroup", GPU_HOST, enabled="memory io").install(monkeypatch)


def test_a_delegated_subtree_of_our_own_is_the_first_choice(
    fs: FakeCgroupfs, tmp_path: Path
) -> None:
    fs._write(fs.root / "cgroup.subtree_control", "cpu io memory pids\n")
    fs.cgroup("system.slice", enabled="cpu io memory pids")  # a Delegate=yes scope's parent
    own = fs.cgroup("system.slice/run-u7.scope", procs=(ME, OTHER))
    os.setxattr(own, "trusted.delegate", b"1")  # how systemd marks a Delegate=yes scope
    layout = local_host.probe_cgroups(True, fs.root, _self(tmp_path, "system.slice/run-u7.scope"))
    assert layout.kind == "delegated" and layout.cgroup2
    assert layout.memory == layout.pids == layout.cpu == own / "ari-sandboxes"
    assert fs.procs(own / "ari-harness") == [str(ME), str(OTHER)]  # out of the way: no
    assert fs.procs(own) == []  # internal processes where controllers are enabled
    assert {"cpu", "memory", "pids"} <= fs._words(own / "cgroup.subtree_control")
    # Nothing outside the delegated subtree was written.
    assert all(own == c or own in c.parents for c in fs.touched()), fs.touched()


def test_root_in_a_non_delegating_cgroup_gets_its_own_top_level_cgroup(
    fs: FakeCgroupfs, tmp_path: Path
) -> None:
    # The GPU server: the root offers everything; it hands memory and io down, not cpu, pids.
    own = fs.cgroup("init.scope", procs=(ME, OTHER))
    foreign = fs.cgroup("system.slice/sshd.service", procs=(7,))
    layout = local_host.probe_cgroups(True, fs.root, _self(tmp_path, "init.scope"))
    top = fs.root / "ari-bench"
    assert layout.kind == "top" and layout.cgroup2, layout
    assert layout.memory == layout.pids == layout.cpu == top
    assert "init.scope gets no cpu pids from its parent" in layout.why
    assert "own top-level cgroup" in layout.describe()
    # The root's subtree_control only gained what was missing; memory and io stayed on.
    assert fs._words(fs.root / "cgroup.subtree_control") == {"cpu", "io", "memory", "pids"}
    root_writes = [t for p, t in fs.writes if p == fs.root / "cgroup.subtree_control"]
    assert root_writes == ["+pids +cpu"]  # only the missing ones, only added
    assert not top.exists()  # the probe leaves nothing: each tree makes it again
    assert fs.procs(own) == [str(ME), str(OTHER)] and not (own / "ari-harness").exists()

    support = _support(layout)
    first = local_host.ProcessCgroups(support, 1 << 30, 64, 2.0)
    second = local_host.ProcessCgroups(support, 1 << 30, 64, 2.0)
    [one], [two] = first.dirs, second.dirs
    assert one.parent == top and two.parent == top
    assert (one / "memory.max").read_text() == str(1 << 30)
    assert (one / "pids.max").read_text() == "64"
    assert (one / "cpu.max").read_text() == "200000 100000"
    assert fs._words(top / "cgroup.subtree_control") == {"cpu", "memory", "pids"}
    # A tree's first process joins its cgroup (the launcher writes 0 for itself); nobody else
    # of our cgroup moves.
    fs.write_text(one / "cgroup.procs", str(OTHER + 1))
    assert fs.procs(own) == [str(ME), str(OTHER)]
    fs._write(one / "cgroup.procs", "")  # that tree is gone
    first.remove()
    assert not one.exists() and top.is_dir()  # the other tree's cgroup keeps it
    second.remove()
    assert not top.exists()  # removed with its last tree
    # Written: the root's subtree_control, and what we made; never `own`, never a stranger.
    assert set(fs.touched()) == {fs.root, top, one, two}
    assert fs.procs(foreign) == ["7"] and fs.writes  # untouched


def test_root_never_arranges_a_cgroup_it_was_not_given(fs: FakeCgroupfs, tmp_path: Path) -> None:
    # The same server after a first run: the root now hands cpu and pids down (we added them),
    # so init.scope offers all three. It holds a stranger, and nobody delegated it to us.
    fs._write(fs.root / "cgroup.subtree_control", "cpu io memory pids\n")
    own = fs.cgroup("init.scope", procs=(1, ME))
    layout = local_host.probe_cgroups(True, fs.root, _self(tmp_path, "init.scope"))
    assert layout.kind == "top" and layout.memory == fs.root / "ari-bench", layout
    assert "init.scope was not delegated" in layout.why
    assert fs.procs(own) == ["1", str(ME)] and not (own / "ari-harness").exists()
    assert fs.touched() == [fs.root / "ari-bench"]  # made and removed by the probe: no more
    # A user who may write the same cgroup had it delegated: the kernel says so by letting it.
    layout = local_host.probe_cgroups(False, fs.root, _self(tmp_path, "init.scope"))
    assert layout.kind == "delegated" and layout.memory == own / "ari-sandboxes"


def test_the_top_cgroup_is_made_again_when_a_concurrent_toolkit_removed_it(
    fs: FakeCgroupfs, tmp_path: Path
) -> None:
    fs.cgroup("init.scope", procs=(ME,))
    layout = local_host.probe_cgroups(True, fs.root, _self(tmp_path, "init.scope"))
    top = fs.root / "ari-bench"
    support = _support(layout)
    first = local_host.ProcessCgroups(support, 1 << 30, 64)
    first.remove()
    assert not top.exists()
    again = local_host.ProcessCgroups(support, 1 << 30, 64)  # the probe's answer still holds
    [directory] = again.dirs
    assert directory.parent == top and (directory / "memory.max").read_text() == str(1 << 30)
    again.remove()


def test_a_tree_cgroup_that_cannot_be_made_leaves_no_top(fs: FakeCgroupfs, tmp_path: Path) -> None:
    fs.cgroup("init.scope", procs=(ME,))
    layout = local_host.probe_cgroups(True, fs.root, _self(tmp_path, "init.scope"))
    top = fs.root / "ari-bench"
    fs.readonly.add(top)  # its children cannot be made (say, a cgroup.max.descendants limit)
    with pytest.raises(PermissionError):
        local_host.ProcessCgroups(_support(layout), 1 << 30, 64)
    assert not top.exists()


def test_no_write_access_is_refused_with_the_reason(fs: FakeCgroupfs, tmp_path: Path) -> None:
    # A user without delegation: every cgroup belongs to root.
    own = fs.cgroup("user.slice/user-1000.slice/session-3.scope", procs=(ME,))
    fs.readonly |= {fs.root, *own.parents, own}
    fs.readonly -= {fs.root.parent}
    self_file = _self(tmp_path, "user.slice/user-1000.slice/session-3.scope")
    layout = local_host.probe_cgroups(False, fs.root, self_file)
    assert layout.kind == "none" and not layout.cgroup2
    assert layout.memory is layout.pids is layout.cpu is None
    assert "session-3.scope gets no cpu memory pids from its parent" in layout.why
    assert "cannot make" in layout.why and "Permission denied" in layout.why
    assert fs.touched() == []  # refused: nothing written anywhere


def test_an_ancestor_with_processes_cannot_hand_controllers_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A container's cgroup namespace: the top it sees is a cgroup that holds processes of its
    # own (not the true root), so it can enable nothing for a child, and we move nobody.
    fs = FakeCgroupfs(tmp_path / "cgroup", GPU_HOST, enabled="cpu memory pids")
    fs.install(monkeypatch)
    fs.cgroup("docker", enabled="cpu memory pids")
    ns_root = fs.cgroup("docker/abc", procs=(1, 2))
    fs.cgroup("docker/abc/app", procs=(ME,))
    fs.readonly |= {fs.root, fs.root / "docker"}
    layout = local_host.probe_cgroups(True, fs.root, _self(tmp_path, "docker/abc/app"))
    assert layout.kind == "none", layout
    assert "cannot hand controllers down" in layout.why, layout.why
    assert not (ns_root / "ari-bench").exists()  # its failed attempt left nothing behind
    assert fs.procs(ns_root) == ["1", "2"]  # nobody else's processes were moved
    assert fs._words(ns_root / "cgroup.subtree_control") == set()


def test_a_subtree_with_some_controllers_is_used_for_those(
    fs: FakeCgroupfs, tmp_path: Path
) -> None:
    # A user's delegated scope whose manager hands down memory and pids, not cpu.
    fs._write(fs.root / "cgroup.subtree_control", "cpu io memory pids\n")
    fs.cgroup("user.slice", enabled="cpu memory pids")
    fs.cgroup("user.slice/user-1000.slice", enabled="memory pids")
    fs.cgroup("user.slice/user-1000.slice/user@1000.service", enabled="memory pids")
    rel = "user.slice/user-1000.slice/user@1000.service/run-r1.scope"
    own = fs.cgroup(rel, procs=(ME,))
    fs.readonly |= {fs.root, fs.root / "user.slice", fs.root / "user.slice/user-1000.slice"}
    layout = local_host.probe_cgroups(False, fs.root, _self(tmp_path, rel))
    assert layout.kind == "partial", layout
    assert layout.memory == layout.pids == own / "ari-sandboxes" and layout.cpu is None
    assert "gets no cpu from its parent" in layout.why and "offers no cpu" in layout.why
    assert "with memory pids only" in layout.describe()


def test_a_user_with_a_delegated_ancestor_uses_it(fs: FakeCgroupfs, tmp_path: Path) -> None:
    fs._write(fs.root / "cgroup.subtree_control", "cpu io memory pids\n")
    fs.cgroup("user.slice", enabled="cpu memory pids")
    fs.cgroup("user.slice/user-1000.slice", enabled="cpu memory pids")
    service = fs.cgroup("user.slice/user-1000.slice/user@1000.service", enabled="memory pids")
    fs.cgroup("user.slice/user-1000.slice/user@1000.service/app.slice", enabled="memory pids")
    rel = "user.slice/user-1000.slice/user@1000.service/app.slice/term.scope"
    own = fs.cgroup(rel, procs=(ME,))
    fs.readonly |= {fs.root, fs.root / "user.slice", fs.root / "user.slice/user-1000.slice"}
    layout = local_host.probe_cgroups(False, fs.root, _self(tmp_path, rel))
    assert layout.kind == "top" and layout.memory == service / "ari-bench", layout
    assert fs._words(service / "cgroup.subtree_control") == {"cpu", "memory", "pids"}
    assert fs.procs(own) == [str(ME)]


def test_a_hybrid_host_is_not_v2_and_v1_needs_root(tmp_path: Path) -> None:
    root = tmp_path / "cgroup"
    (root / "memory").mkdir(parents=True)
    (root / "cgroup.controllers").write_text("")
    assert not layouts.is_cgroup2(root)
    layout = local_host.probe_cgroups(False, root, _self(tmp_path, ""))
    assert layout.kind == "none" and "needs root" in layout.why
    assert local_host.probe_cgroups(False, tmp_path / "none", _self(tmp_path, "")).kind == "none"


def test_a_support_without_a_layout_makes_plain_cgroups(tmp_path: Path) -> None:
    parent = tmp_path / "ari-sandboxes"
    parent.mkdir()
    support = dataclasses.replace(
        _support(layouts.CgroupLayout("delegated", "", parent, parent, parent)), cgroups=None
    )
    cgroups = local_host.ProcessCgroups(support, 1 << 20, None)
    assert [d.parent for d in cgroups.dirs] == [parent]
