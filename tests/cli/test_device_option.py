"""`--device`: auto picks the GPU only when CUDA can use one; anything else is refused clearly."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from toolkit.commands.options import device_option
from toolkit.run import roles
from toolkit.run.roles import detect_device


@click.command()
@device_option("Where to run.")
def show(device: str) -> None:
    click.echo(device)


@pytest.mark.parametrize("given", ["cpu", "cuda", "cuda:0", "cuda:3"])
def test_explicit_devices_pass_through(given: str) -> None:
    done = CliRunner().invoke(show, ["--device", given])
    assert done.exit_code == 0 and done.output.strip() == given


@pytest.mark.parametrize("given", ["gpu", "cuda:x", "cpu:1", "cuda:", "mps", ""])
def test_unknown_devices_are_refused_with_the_choices(given: str) -> None:
    done = CliRunner().invoke(show, ["--device", given])
    assert done.exit_code == 2
    assert "want auto, cpu, cuda or cuda:N" in done.output


def test_auto_without_an_nvidia_driver_is_cpu_without_loading_torch(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # No driver control node: torch's CUDA probe is not even tried.
    real_path = roles.Path
    monkeypatch.setattr(
        roles,
        "Path",
        lambda p: tmp_path / "absent" if p == "/dev/nvidiactl" else real_path(p),
    )
    import builtins

    real_import = builtins.__import__

    def no_torch(name: str, *args: object, **kwargs: object) -> object:
        if name == "torch":
            raise AssertionError("torch imported to detect a device on a host without a driver")
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", no_torch)
    assert detect_device() == "cpu"
    done = CliRunner().invoke(show, [])
    assert done.exit_code == 0 and done.output.strip() == "cpu"


def test_auto_with_a_driver_asks_torch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    node = tmp_path / "nvidiactl"
    node.touch()
    real_path = roles.Path
    monkeypatch.setattr(roles, "Path", lambda p: node if p == "/dev/nvidiactl" else real_path(p))
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert detect_device() == "cuda"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert detect_device() == "cpu"  # a driver but a CPU build of torch (or no usable GPU)
