"""GPU pinning of the local backend: `create_sandbox(..., gpus=[...])` and `RunSpec.gpu`.

This host has no GPU, so the device tree is a fake one (the backend reads its GPUs from a
device folder and the driver's proc folder, both module settings): the hiding itself is the
real mount-namespace mechanism, checked from inside a real sandbox.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolkit.sandbox import create_sandbox
from toolkit.sandbox.local import gpus

UUIDS = {
    "0000:17:00.0": ("GPU-aaaa", 1),  # bus order != minor order, as on real machines
    "0000:65:00.0": ("GPU-bbbb", 0),
}


@pytest.fixture
def fake_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # Inside the sandbox's root: the rest of /tmp is a private tmpfs in there.
    dev, proc = tmp_path / "root" / "dev", tmp_path / "proc"
    dev.mkdir(parents=True)
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
        (dev / name).write_text(f"device {name}\n")
    for bus, (uuid, minor) in UUIDS.items():
        (proc / bus).mkdir(parents=True)
        (proc / bus / "information").write_text(
            f"Model: \t\t Test GPU\nGPU UUID: \t {uuid}\nDevice Minor: \t {minor}\n"
        )
    monkeypatch.setattr(gpus, "DEV", dev)
    monkeypatch.setattr(gpus, "NVIDIA_PROC", proc)
    return dev


def test_ids_are_resolved_in_bus_order_to_uuid_and_device_node(fake_gpus: Path) -> None:
    pin = gpus.pin(["0"])  # index 0 = first by bus = minor 1
    assert pin.env["CUDA_VISIBLE_DEVICES"] == "GPU-aaaa"
    assert pin.hide == [fake_gpus / "nvidia0"]
    assert gpus.pin(["GPU-bbbb"]).hide == [fake_gpus / "nvidia1"]
    assert gpus.host_gpu_ids() == ["0", "1"]
    none = gpus.pin([])
    assert none.env["CUDA_VISIBLE_DEVICES"] == ""
    assert set(none.hide) == {
        fake_gpus / n for n in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm")
    }
    with pytest.raises(ValueError, match="not a GPU of this host"):
        gpus.pin(["7"])


def test_without_the_driver_an_index_is_the_device_minor(tmp_path: Path) -> None:
    dev = tmp_path / "dev"
    dev.mkdir()
    (dev / "nvidia3").write_text("")
    (dev / "nvidia5").write_text("")
    pin = gpus.pin(["5"], proc=tmp_path / "absent", dev=dev)
    assert pin.env["CUDA_VISIBLE_DEVICES"] == "5" and pin.hide == [dev / "nvidia3"]


def _inside(box_gpus: list[str] | None, root: Path, dev: Path) -> str:
    with create_sandbox("local", root=root, gpus=box_gpus) as box:
        script = (
            'printf "visible=%s\\n" "${CUDA_VISIBLE_DEVICES-unset}"; '
            f'for f in {dev}/*; do printf \'%s=%s\\n\' "$(basename $f)" "$(cat $f)"; done'
        )
        # An agent that sets its own CUDA_VISIBLE_DEVICES still cannot open the hidden nodes.
        result = box.exec(["sh", "-c", f"CUDA_VISIBLE_DEVICES=0,1 true; {script}"], timeout=30)
        assert result.ok, result.stderr
        if box_gpus is not None:
            assert ("gpu-pinned" in box.isolation) or ("gpus" in box.not_isolated)
        return result.stdout.decode()


def test_a_pinned_sandbox_sees_only_its_gpu(fake_gpus: Path, tmp_path: Path) -> None:
    root = tmp_path / "root"
    pinned = _inside(["1"], root, fake_gpus)  # index 1 = GPU-bbbb = /dev/nvidia0
    assert "visible=GPU-bbbb" in pinned
    box = create_sandbox("local", root=root, gpus=["1"])
    namespaces = "gpu-pinned" in box.isolation
    box.cleanup()
    assert namespaces or "CI" not in os.environ, "CI runs as root: the nodes must be hidden"
    if namespaces:  # the hidden node reads as empty (/dev/null is bound over it)
        assert "nvidia0=device nvidia0" in pinned
        assert "nvidia1=\n" in pinned and "nvidiactl=device nvidiactl" in pinned
    nothing = _inside([], root, fake_gpus)
    assert "visible=\n" in nothing
    if namespaces:
        assert "nvidia0=\n" in nothing and "nvidiactl=\n" in nothing
    as_is = _inside(None, root, fake_gpus)
    assert "visible=unset" in as_is and "nvidia1=device nvidia1" in as_is
