"""doctor's words (issue 29 item 3): a backend that is not there is said once, not once per
isolation requirement; the torch fix points at a page that exists; --providers is taken."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from toolkit.cli import cli
from toolkit.host.doctor import Doctor, TorchBuild
from toolkit.host.floor import HostIsolation
from toolkit.sandbox.local.cgroups import CgroupLayout
from toolkit.tracks.model import get_track

REPO = Path(__file__).resolve().parents[2]
SANDBOXES = Path("/sys/fs/cgroup/user.slice/ari-sandboxes")
DELEGATED = CgroupLayout("delegated", "a delegated scope", SANDBOXES, SANDBOXES, SANDBOXES)
NO_ENGINE = "no Docker engine answers at unix:///var/run/docker.sock (start dockerd)"


def _doctor(backend: str, docker: HostIsolation) -> Doctor:
    full = HostIsolation("local", True, None, True, True, True, True)
    return Doctor(
        get_track(REPO / "results", "v1-h100-1h"),
        backend,
        cgroup=lambda: DELEGATED,
        userns=lambda: (True, "allowed"),
        gpus=lambda: ["NVIDIA H100 80GB HBM3"],
        driver=lambda: "580.95.05",
        torch=lambda: TorchBuild("2.13.0+cu130", "13.0", True, ["NVIDIA H100 80GB HBM3"]),
        docker_gpus=lambda: None,
        local=lambda: full,
        docker=lambda _gpu: docker,
    )


def test_an_absent_docker_engine_is_said_once(monkeypatch: pytest.MonkeyPatch) -> None:
    free = shutil.disk_usage("/")._replace(free=2**40)
    monkeypatch.setattr(shutil, "disk_usage", lambda _path: free)
    gone = HostIsolation("docker", False, NO_ENGINE)
    (iso,) = [c for c in _doctor("docker", gone).fast() if c.name == "isolation (docker)"]
    assert not iso.ok
    assert iso.here.count("no Docker engine") == 1, iso.here
    assert iso.fix == "use --backend local, which has all of it here"
    weak_local = _doctor("docker", gone)
    weak_local.local = lambda: HostIsolation("local", True, None, True, False, False, True)
    (iso,) = [c for c in weak_local.fast() if c.name == "isolation (docker)"]
    assert iso.here.count("no Docker engine") == 1 and "no Docker engine" not in iso.fix
    assert "another --backend" in iso.fix


def test_the_torch_fix_points_at_a_page_that_exists() -> None:
    text = (REPO / "toolkit" / "host" / "doctor.py").read_text(encoding="utf-8")
    assert "GPU install" not in text
    assert (REPO / "site" / "docs" / "operators" / "gpu.md").is_file()
    assert "A GPU box" in (REPO / "site" / "docs" / "operators" / "gpu.md").read_text()
    assert "README for the GPU install" not in (REPO / "Makefile").read_text()


def test_doctor_takes_a_providers_file(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text('[mine]\nkind = "openai"\nkey_env = "ARI_TEST_ABSENT_KEY"\n')
    done = CliRunner().invoke(
        cli, ["doctor", "--provider", "mine", "--providers", str(path), "--model", "m1"]
    )
    assert "no such option" not in done.output, done.output
    assert "unknown provider" not in done.output, done.output
    assert "provider" in done.output and "ARI_TEST_ABSENT_KEY" in done.output, done.output
