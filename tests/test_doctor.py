"""`toolkit doctor` and the isolation floor: a track the host cannot run validly is refused
before any work, and says what to fix. Probes read fake cgroup and driver trees here; the real
ones are read on the lent GPU machine (a cgroup-v2 host)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.sandbox.fake_cgroupfs import FakeCgroupfs
from toolkit.cli import cli
from toolkit.host import floor
from toolkit.host.doctor import (
    WORK_ROOM_BYTES,
    Check,
    Doctor,
    TorchBuild,
    driver_version,
    failed,
    gpu_names,
    plan_disk,
    userns_state,
)
from toolkit.host.floor import HostIsolation
from toolkit.sandbox.local import host as local_host
from toolkit.sandbox.local.cgroups import CgroupLayout
from toolkit.tracks.model import get_track

REPO = Path(__file__).resolve().parents[1]
H100_INFO = "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ: 42\nGPU UUID: GPU-1234\nDevice Minor: 0\n"


def _official():
    return get_track(REPO / "results", "v1-h100-1h")


GIB = 2**30
TOP = Path("/sys/fs/cgroup/ari-bench")
OWN = Path("/sys/fs/cgroup/init.scope")
WHY = f"{OWN} gets no cpu pids from its parent"


def _layout(kind: str, why: str = "") -> CgroupLayout:
    where = {"delegated": OWN / "ari-sandboxes", "top": TOP}.get(kind)
    if kind == "partial":
        return CgroupLayout(kind, why, None, OWN / "ari-sandboxes", None, OWN)
    return CgroupLayout(kind, why, where, where, where, OWN)


def _row(name: str, **over: object):
    (row,) = [c for c in _doctor(**over).fast() if c.name == name]
    return row


@pytest.mark.usefixtures("roomy")
def test_the_cgroup_row_says_which_layout_and_why() -> None:
    row = _row("cgroups", cgroup=lambda: _layout("delegated"), systemd=lambda: True)
    assert row.ok and row.here == f"v2, delegated subtree {OWN}/ari-sandboxes (memory pids cpu)"
    assert row.fix == ""
    # The H100 server of issue 26: root, no systemd, a parent that passes no cpu and pids.
    row = _row("cgroups", cgroup=lambda: _layout("top", WHY), systemd=lambda: False)
    assert row.ok and not row.required and row.fix == ""
    assert row.here == f"v2, own top-level cgroup {TOP} (memory pids cpu), because {WHY}"
    # Under systemd the same works, and the delegated scope is named as the better way.
    row = _row("cgroups", cgroup=lambda: _layout("top", WHY), systemd=lambda: True)
    assert row.ok and row.fix.startswith("works; under systemd a delegated scope is preferred")
    assert "`systemd-run --scope -p Delegate=yes -- toolkit run --track v1-h100-1h ...`" in row.fix


@pytest.mark.usefixtures("roomy")
@pytest.mark.parametrize(
    "why, root, systemd, fix",
    [
        (
            "... cannot make /sys/fs/cgroup/ari-bench (Permission denied)",
            False,
            True,
            "run it as `systemd-run --user --scope -p Delegate=yes -- toolkit run --track "
            "v1-h100-1h ...` (a delegated scope), or as root, or use --backend docker",
        ),
        (
            "... cannot make /sys/fs/cgroup/ari-bench (Permission denied)",
            False,
            False,
            "run as root (the toolkit then makes its own /sys/fs/cgroup/ari-bench), or from a "
            "cgroup delegated to your user with memory, pids and cpu, or use --backend docker",
        ),
        (
            "/sys/fs/cgroup/cgroup.subtree_control refused +cpu +pids (a cgroup with processes "
            "of its own cannot hand controllers down)",
            True,
            False,
            "move the processes of the cgroup named above into a child cgroup of it (as a "
            "container's init would), or use --backend docker",
        ),
        (
            "... cannot make /sys/fs/cgroup/ari-bench (Read-only file system)",
            True,
            False,
            "mount /sys/fs/cgroup read-write (a container: a private, writable cgroup mount)",
        ),
    ],
)
def test_without_a_layout_the_fix_fits_the_host(
    why: str, root: bool, systemd: bool, fix: str
) -> None:
    weak = HostIsolation("local", True, None, True, False, False, True)
    over = {
        "cgroup": lambda: _layout("none", why),
        "is_root": lambda: root,
        "systemd": lambda: systemd,
        "local": lambda: weak,
    }
    row = _row("cgroups", **over)
    assert not row.ok and row.required and row.here == f"none: {why}"
    assert row.fix == fix
    assert not (root and "run as root" in row.fix)  # root is never told to become root
    iso = _row("isolation (local)", **over)
    assert not iso.ok and iso.fix == fix  # the same cause, the same fix


def test_the_gpu_server_layout_passes_cgroups_and_isolation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, roomy: None
) -> None:
    """The whole chain on a fake of the H100 server: root in `init.scope`, whose parent hands
    down memory and io only. The probe's layout feeds the cgroups row and the floor."""
    fs = FakeCgroupfs(tmp_path / "cg", "cpuset cpu io memory hugetlb pids", "memory io")
    fs.install(monkeypatch)
    fs.cgroup("init.scope", procs=(os.getpid(),))
    (tmp_path / "self").write_text("0::/init.scope\n")
    layout = local_host.probe_cgroups(True, fs.root, tmp_path / "self")
    support = local_host.HostSupport(
        True, False, True, layout.pids, layout.memory, layout.cpu, cgroup2=True, cgroups=layout
    )
    monkeypatch.setattr(local_host, "probe", lambda: support)
    doctor = Doctor(
        _official(),
        "local",
        systemd=lambda: False,
        is_root=lambda: True,
        gpus=lambda: ["NVIDIA H100 80GB HBM3"],
        driver=lambda: "580.95.05",
        torch=lambda: TorchBuild("2.11.0+cu130", "13.0", True, ["NVIDIA H100 80GB HBM3"]),
    )
    checks = doctor.fast(required_only=True)
    assert failed(checks) == [], failed(checks)  # what `toolkit run` checks before any work
    rows = {c.name: c for c in checks}
    assert "own top-level cgroup" in rows["cgroups"].here
    assert rows["isolation (local)"].here == "all of it"


def test_cgroup_versions_described(tmp_path: Path) -> None:
    v1 = tmp_path / "v1"
    (v1 / "memory").mkdir(parents=True)
    me = tmp_path / "self"
    me.write_text("0::/\n")
    assert local_host.probe_cgroups(False, v1, me).describe() == (
        "none: cgroup v1 needs root to make cgroups"
    )
    assert local_host.probe_cgroups(False, tmp_path / "nothing", me).kind == "none"


def test_user_namespaces_and_apparmor(tmp_path: Path) -> None:
    limit, apparmor = tmp_path / "max", tmp_path / "aa"
    limit.write_text("0\n")
    assert userns_state(limit, apparmor) == (False, "disabled (user.max_user_namespaces = 0)")
    limit.write_text("63000\n")
    apparmor.write_text("1\n")
    allowed, text = userns_state(limit, apparmor)
    assert not allowed and "AppArmor" in text
    apparmor.write_text("0\n")
    assert userns_state(limit, apparmor) == (True, "allowed")


def test_gpus_and_driver_from_the_driver_files(tmp_path: Path) -> None:
    proc = tmp_path / "nvidia"
    (proc / "gpus" / "0000:01:00.0").mkdir(parents=True)
    (proc / "gpus" / "0000:01:00.0" / "information").write_text(H100_INFO)
    (proc / "version").write_text(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build\n"
    )
    assert gpu_names(proc) == ["NVIDIA H100 80GB HBM3"]
    assert driver_version(proc) == "580.95.05"
    assert gpu_names(tmp_path / "absent") == [] and driver_version(tmp_path / "absent") is None


def _roomy(monkeypatch: pytest.MonkeyPatch) -> None:
    """A host with a terabyte free (the disk check is not what these tests are about)."""
    free = shutil.disk_usage("/")._replace(free=2**40)
    monkeypatch.setattr(shutil, "disk_usage", lambda _path: free)


@pytest.fixture
def roomy(monkeypatch: pytest.MonkeyPatch) -> None:
    _roomy(monkeypatch)


def _doctor(backend: str = "local", **over: object) -> Doctor:
    full = HostIsolation("local", True, None, True, True, True, True)
    kw: dict[str, object] = {
        "cgroup": lambda: _layout("delegated"),
        "systemd": lambda: False,
        "is_root": lambda: True,
        "userns": lambda: (True, "allowed"),
        "gpus": lambda: ["NVIDIA H100 80GB HBM3"],
        "driver": lambda: "580.95.05",
        "torch": lambda: TorchBuild("2.13.0+cu130", "13.0", True, ["NVIDIA H100 80GB HBM3"]),
        "docker_gpus": lambda: "nvidia runtime",
        "local": lambda: full,
        "docker": lambda _gpu: HostIsolation("docker", True, None, True, True, True, True),
    }
    kw.update(over)
    return Doctor(_official(), backend, **kw)  # type: ignore[arg-type]


def test_a_capable_gpu_server_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    _roomy(monkeypatch)
    assert failed(_doctor().fast()) == []
    assert failed(_doctor("docker").fast()) == []


def test_a_cgroup_v2_host_without_caps_is_sent_to_docker(monkeypatch: pytest.MonkeyPatch) -> None:
    _roomy(monkeypatch)
    weak = HostIsolation("local", True, None, True, False, False, True)
    bad = failed(_doctor(local=lambda: weak, cgroup=lambda: _layout("none", "x")).fast())
    names = [c.name for c in bad]
    assert "isolation (local)" in names
    (iso,) = [c for c in bad if c.name == "isolation (local)"]
    assert "memory-per-tree" in iso.here and "processes-per-tree" in iso.here
    assert iso.fix == "fix what the cgroups row says, or use --backend docker"


def test_cpu_torch_and_no_gpu_runtime_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    _roomy(monkeypatch)
    doctor = _doctor(
        "docker",
        torch=lambda: TorchBuild("2.13.0+cpu", None, False, []),
        docker_gpus=lambda: None,
        docker=lambda gpu: HostIsolation("docker", True, None, True, True, True, gpu is not None),
    )
    names = {c.name for c in failed(doctor.fast())}
    assert {"torch", "docker GPUs", "isolation (docker)"} <= names


def test_the_demo_track_runs_anywhere() -> None:
    demo = get_track(REPO / "results", "demo-cpu-3")
    assert failed(Doctor(demo, "local").fast()) == []


def test_run_refuses_the_official_track_on_this_box_before_any_work(tmp_path: Path) -> None:
    if failed(Doctor(_official(), "local").fast()) == []:
        pytest.skip("this host can run the official track (a GPU server)")
    results = tmp_path / "results"
    results.mkdir()
    shutil.copy(REPO / "results" / "tracks.json", results)
    home = tmp_path / "home"
    done = CliRunner().invoke(
        cli,
        ["run", "--seed", "0", "--track", "v1-h100-1h", "--results", str(results)],
        env={"ARI_HOME": str(home)},
    )
    assert done.exit_code == 1, done.output
    lines = [line for line in done.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "cannot run validly on this host" in lines[0], done.output
    assert "toolkit doctor --track v1-h100-1h" in lines[0]
    assert list(results.rglob("*.json")) == [results / "tracks.json"]  # no result file
    assert not (home / "runs").exists() and not (home / "data").exists()  # no work done


def test_doctor_command_exit_codes() -> None:
    ok = CliRunner().invoke(cli, ["doctor", "--results", str(REPO / "results")])
    assert ok.exit_code == 0, ok.output
    assert "can run track 'demo-cpu-3'" in ok.output
    if failed(Doctor(_official(), "local").fast()):
        bad = CliRunner().invoke(
            cli, ["doctor", "--track", "v1-h100-1h", "--results", str(REPO / "results")]
        )
        assert bad.exit_code == 1 and "cannot run validly here" in bad.output


def test_floor_words_read_from_both_backends_sandboxes() -> None:
    local_runner = ["cgroup-memory", "cgroup-pids", "mountns", "netns", "pidns", "gpu-pinned"]
    docker_runner = ["cgroup-memory", "cgroup-pids", "container", "mountns", "netns", "pidns"]
    words = list(floor.OFFICIAL_FLOOR)
    assert floor.missing(words, {"runner": local_runner}, gpu=True) == []
    assert floor.missing(words, {"runner": [*docker_runner, "gpus:0"]}, gpu=True) == []
    assert floor.missing(words, {"runner": docker_runner}, gpu=True) == ["runner: gpu-pinned"]
    degraded = ["pgroup", "subreaper", "rlimits"]
    assert len(floor.missing(words, {"runner": degraded}, gpu=False)) == 4
    controller = ["pidns", "mountns", "egress-allowlist", "cgroup-memory", "cgroup-pids"]
    assert floor.missing(words, {"controller": controller}, gpu=True) == []


def test_an_unknown_floor_word_is_refused(tmp_path: Path) -> None:
    import json

    tracks = json.loads((REPO / "results" / "tracks.json").read_text())
    tracks[0]["isolation_floor"] = ["roles-isolated", "vibes"]
    (tmp_path / "tracks.json").write_text(json.dumps(tracks))
    from toolkit.tracks.model import RegistryError

    with pytest.raises(RegistryError, match="unknown isolation requirement 'vibes'"):
        get_track(tmp_path, "v1-h100-1h")


def test_the_local_sandbox_words_meet_the_floor_on_this_host(tmp_path: Path) -> None:
    """What the local backend really records here, against the floor it predicts."""
    from toolkit.sandbox import Limits, create_sandbox

    predicted = floor.local_isolation().lacks(list(floor.OFFICIAL_FLOOR), gpu=False)
    root = tmp_path / "root"
    root.mkdir()
    limits = Limits(memory_bytes=2**30, max_processes=64)
    with create_sandbox("local", root=root, limits=limits) as box:
        actual = floor.missing(list(floor.OFFICIAL_FLOOR), {"runner": box.isolation}, gpu=False)
    assert [m.split(": ")[1] for m in actual] == predicted, (actual, predicted, os.geteuid())


def test_the_disk_row_asks_what_a_run_takes_not_the_cap() -> None:
    """The H100 server: 63.9 GiB free, the official track's 10 GB of data and 64 GiB cap. A
    run takes the data, then a workspace capped at half of what is left: it fits."""
    data, cap = 10_000_000_000, 64 * GIB
    plan = plan_disk(int(63.9 * GIB), data, cap, "ext4")
    assert plan.ok and plan.short == 0, plan
    assert "capped at 27.3 GiB (the track's cap: 64.0 GiB)" in plan.here
    least = data + WORK_ROOM_BYTES
    needed = data + 2 * least
    assert plan.need.startswith(f"{needed / GIB:.1f} GiB free")
    # Just below that: refused, saying how much is missing.
    short = plan_disk(needed - GIB, data, cap, "ext4")
    assert not short.ok and short.short == GIB
    assert plan_disk(needed, data, cap, "ext4").ok
    # In memory the workspace takes no disk; uncapped, what it holds.
    assert plan_disk(data, data, cap, "tmpfs").ok and not plan_disk(data - 1, data, cap, "tmpfs").ok
    assert plan_disk(data + least, data, None, "disk").ok
    assert not plan_disk(data + least - 1, data, None, "disk").ok


def test_the_disk_row_and_its_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    free = shutil.disk_usage("/")._replace(free=20 * GIB)
    monkeypatch.setattr(shutil, "disk_usage", lambda _path: free)
    row = _row("disk", workspace_kind=lambda _cap: "ext4")
    assert not row.ok and row.required
    assert row.fix.startswith("free 15.9 GiB more there, or move the state folder"), row.fix
    free = shutil.disk_usage("/")._replace(free=int(63.9 * GIB))
    monkeypatch.setattr(shutil, "disk_usage", lambda _path: free)
    row = _row("disk", workspace_kind=lambda _cap: "ext4")
    assert row.ok and row.fix == "" and "63.9 GiB free at" in row.here


def test_the_disk_row_never_asks_more_than_the_track_caps() -> None:
    """The demo track caps its workspace at 2 GiB: the row asked for "a workspace of at least
    4.0 GiB" beside "the track's cap: 2.0 GiB" (issue 39)."""
    cap = 2 * GIB
    plan = plan_disk(int(74.2 * GIB), 0, cap, "ext4")
    assert plan.ok
    assert "a workspace of at least 2.0 GiB" in plan.need and plan.need.startswith("4.0 GiB free")
    assert "capped at 2.0 GiB (the track's cap: 2.0 GiB)" in plan.here
    assert not plan_disk(4 * GIB - 1, 0, cap, "ext4").ok


def test_a_long_fix_folds_and_is_never_cut() -> None:
    from rich.console import Console

    from toolkit.commands.doctor import _table

    fix = "systemd-run --user --scope -p Delegate=yes --property=DelegateSubgroup=ari toolkit run"
    here = (
        "v2, not delegated: /sys/fs/cgroup/user.slice/user-1000.slice/session-3.scope is read-only"
    )
    check = Check("cgroups", "a delegated cgroup v2 subtree", here, False, required=True, fix=fix)
    console = Console(width=100, record=True, color_system=None)
    console.print(_table([check], "doctor"))
    text = console.export_text()
    assert "…" not in text
    cells = "".join(
        line.split("│")[5].strip() for line in text.splitlines() if line.count("│") == 6
    )
    assert cells.replace(" ", "") == fix.replace(" ", "")


@pytest.mark.usefixtures("roomy")
def test_the_doctor_says_what_runs_on_one_host_share() -> None:
    """#38 item 3: the row names the masking and the measured rate of what stays host-wide;
    a local backend without namespaces says the other runs would be seen, and how to avoid it."""
    from toolkit.sandbox import neighbours

    bound = f"{neighbours.MEASURED_BITS_PER_S:g} bit/s measured"
    for backend in ("local", "docker"):
        row = _row("runs on one host", backend=backend)
        assert row.ok and not row.required and bound in row.here
        assert "only its own cgroups, devices and processes" in row.here
    bare = HostIsolation("local", True, None, False, False, False, False)
    row = _row("runs on one host", local=lambda: bare)
    assert not row.ok and not row.required and "--slots 1" in row.fix and bound in row.here
