"""A GPU this host cannot use is refused before any work (issue 26 item 4).

On a host whose torch cannot use the GPU asked for (this CPU box: no driver, CPU-only torch),
`toolkit run --device cuda` used to run the whole session and record a counted `failed` 0%
seed. Now `run` and `grade` refuse in one line, with the fix, before anything is written."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from toolkit.cli import cli
from toolkit.commands.options import device_problem
from toolkit.paths import state_dir


def _torch_sees_a_gpu() -> bool:
    import torch

    return bool(torch.cuda.is_available())


# Asked of torch itself, not of the check under test (a broken check must fail, not skip).
pytestmark = pytest.mark.skipif(_torch_sees_a_gpu(), reason="torch here can use a GPU")


def _everything_under(folder: Path) -> set[Path]:
    return set(folder.rglob("*")) if folder.exists() else set()


@pytest.mark.parametrize("device", ["cuda", "cuda:0", "cuda:1"])
def test_run_on_a_gpu_this_host_cannot_use_is_refused_before_any_work(
    device: str, tmp_path: Path
) -> None:
    results = tmp_path / "res"
    home_before = _everything_under(state_dir())
    started = time.monotonic()
    done = CliRunner().invoke(
        cli, ["run", "--device", device, "--seed", "0", "--results", str(results)]
    )
    took = time.monotonic() - started
    print(f"refused in {took:.2f}s: {done.output.strip()}")
    assert done.exit_code == 2, done.output
    lines = done.output.strip().splitlines()
    assert len(lines) == 1, lines  # one line, no usage banner
    assert f"--device {device}" in lines[0] and "--device cpu" in lines[0]
    assert not results.exists()  # no results folder, so no result file
    assert _everything_under(state_dir()) == home_before  # nothing prepared in $ARI_HOME


def test_grade_on_a_gpu_this_host_cannot_use_is_refused(tmp_path: Path) -> None:
    exam = tmp_path / "exam.jsonl"
    exam.write_text("{}\n")
    report = tmp_path / "report.json"
    done = CliRunner().invoke(
        cli,
        ["grade", str(tmp_path), "--exam", str(exam), "--device", "cuda", "--json", str(report)],
    )
    assert done.exit_code == 2, done.output
    assert len(done.output.strip().splitlines()) == 1
    assert "--device cuda" in done.output and "--device cpu" in done.output
    assert not report.exists()


def test_cpu_and_auto_are_never_refused() -> None:
    assert device_problem("cpu") is None
    assert device_problem("cpu", "docker") is None


def test_runs_verify_on_a_gpu_this_host_cannot_use_is_refused(tmp_path: Path) -> None:
    result = tmp_path / "r.json"
    result.write_text("{}")
    done = CliRunner().invoke(
        cli, ["runs", "verify", str(result), "--exam", str(result), "--device", "cuda:0"]
    )
    assert done.exit_code == 2 and "--device cuda:0" in done.output, done.output
