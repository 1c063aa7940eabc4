"""`campaign run --gpus` refuses GPU ids this host cannot use, before any work, as
`toolkit run --device cuda` is refused (issue: on a box with no GPU, `--gpus 0` started and its
results recorded GPU 0 on runs that trained on the CPU)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.campaign.conftest import toolkit, write_campaign
from toolkit.campaign import setup
from toolkit.campaign.config import CampaignError


def _host(monkeypatch: pytest.MonkeyPatch, ids: list[str], cuda: bool) -> None:
    monkeypatch.setattr(setup, "host_gpu_ids", lambda: ids)
    monkeypatch.setattr(setup, "host_gpus", lambda: [])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)


def test_ids_this_host_lacks_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    _host(monkeypatch, [], cuda=False)
    with pytest.raises(CampaignError, match=r"--gpus 0: this host has no GPU 0 \(its GPUs: none\)"):
        setup.local_slots("0", None)
    _host(monkeypatch, ["0", "1"], cuda=True)
    with pytest.raises(CampaignError, match=r"no GPU 2 \(its GPUs: 0, 1\)"):
        setup.local_slots("1,2", None)
    assert [s.gpu for s in setup.local_slots("0,1", None)] == ["0", "1"]


def test_a_torch_that_cannot_use_a_gpu_is_refused_on_the_local_backend(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _host(monkeypatch, ["0"], cuda=False)
    with pytest.raises(CampaignError, match="cannot use a GPU"):
        setup.local_slots("0", None, "local")
    assert [s.gpu for s in setup.local_slots("0", None, "docker")] == ["0"]  # the image's torch


def test_the_command_refuses_in_one_line_before_any_work(tmp_path: Path) -> None:
    if setup.host_gpu_ids():
        pytest.skip("this host has GPUs: the refusal is for a box without")
    path = write_campaign(tmp_path, seeds=[0], budget=10)
    before = sorted(p.name for p in (tmp_path / "results").iterdir())
    out = toolkit("campaign", "run", str(path), "--gpus", "0")
    assert out.returncode == 2, out.stdout + out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "no GPU 0" in lines[0], out.stderr
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == before
