"""`toolkit doctor` and the isolation floor: a track the host cannot run validly is refused
before any work, and says what to fix. Probes read fake cgroup and driver trees here; the real
ones are read on the lent GPU machine (a cgroup-v2 host)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from toolkit import floor
from toolkit.cli import cli
from toolkit.doctor import (
    Doctor,
    TorchBuild,
    cgroup_state,
    driver_version,
    failed,
    gpu_names,
    userns_state,
)
from toolkit.floor import HostIsolation
from toolkit.tracks import get_track

REPO = Path(__file__).resolve().parents[1]
H100_INFO = "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ: 42\nGPU UUID: GPU-1234\nDevice Minor: 0\n"


def _official():
    return get_track(REPO / "results", "v1-h100-1h")


def _v2_tree(tmp_path: Path, controllers: str) -> tuple[Path, Path]:
    root = tmp_path / "cg"
    (root / "ari.slice").mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpu io memory pids\n")
    (root / "ari.slice" / "cgroup.controllers").write_text(controllers + "\n")
    (root / "ari.slice" / "cgroup.subtree_control").write_text("")
    me = tmp_path / "self-cgroup"
    me.write_text("0::/ari.slice\n")
    return root, me


def test_cgroup_versions_and_delegation(tmp_path: Path) -> None:
    root, me = _v2_tree(tmp_path, "cpu memory pids")
    assert cgroup_state(root, me) == "v2 (delegated: cpu memory pids)"
    root, me = _v2_tree(tmp_path / "b", "cpu memory")
    assert cgroup_state(root, me) == "v2 (not delegated: controllers missing: pids)"
    v1 = tmp_path / "v1"
    (v1 / "memory").mkdir(parents=True)
    assert cgroup_state(v1, me) == "v1"
    (v1 / "cgroup.controllers").write_text("")
    assert cgroup_state(v1, me) == "hybrid"
    assert cgroup_state(tmp_path / "nothing", me) == "none"


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


def _doctor(backend: str = "local", **over: object) -> Doctor:
    full = HostIsolation("local", True, None, True, True, True, True)
    kw: dict[str, object] = {
        "cgroup": lambda: "v2 (delegated: cpu memory pids)",
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
    bad = failed(_doctor(local=lambda: weak, cgroup=lambda: "v2 (not delegated: x)").fast())
    names = [c.name for c in bad]
    assert "isolation (local)" in names
    (iso,) = [c for c in bad if c.name == "isolation (local)"]
    assert "memory-per-tree" in iso.here and "processes-per-tree" in iso.here
    assert iso.fix == "use --backend docker, which has all of it here"


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
    demo = get_track(REPO / "results", "demo-cpu")
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
    assert "can run track 'demo-cpu'" in ok.output
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
    from toolkit.tracks import RegistryError

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
