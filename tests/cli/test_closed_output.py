"""A run never pays for its output: a closed pipe (`toolkit run ... | head -5`) silences the
run's consoles instead of stopping it, a read-only results folder is refused in one line before
any work, and Ctrl-C ends `toolkit run` with status 130 so that a script around it stops too."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from toolkit.commands.console import make_console
from toolkit.run.interrupt import interrupted_by

CLI = "from toolkit.cli import cli; cli()"
# `toolkit run` whose run prints many lines of the agent's console and is then stopped by
# Ctrl-C: what the command does around the run, without a run.
FAKE_RUN = """
import sys
import toolkit.commands.run as run

def execute_run(spec, *, echo, tick, **_):
    for i in range(2000):
        echo(f"console line {i} " + "x" * 100)
    raise KeyboardInterrupt

run.execute_run = execute_run
from toolkit.cli import cli
cli(sys.argv[1:])
"""


def test_a_steady_console_outlives_its_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    read, write = os.pipe()
    os.close(read)  # the reader went away
    closed = os.fdopen(write, "w")
    monkeypatch.setattr(sys, "stderr", closed)
    console = make_console(stderr=True, steady=True)
    for _ in range(3):
        console.print("x" * 70_000)  # more than a pipe holds: the write must fail
    closed.close()


def test_the_reason_names_a_closed_output() -> None:
    try:
        try:
            raise BrokenPipeError(32, "Broken pipe")
        except BrokenPipeError:
            raise SystemExit(1) from None
    except SystemExit as exc:
        assert "its output was closed" in interrupted_by(exc)
    assert "SystemExit 3" in interrupted_by(SystemExit(3))


def test_a_run_whose_reader_exits_goes_on_and_ctrl_c_exits_130(tmp_path: Path) -> None:
    env = {**os.environ, "ARI_HOME": str(tmp_path / "home")}
    proc = subprocess.Popen(
        [sys.executable, "-c", FAKE_RUN, "run", "--agent", "scripted", "--seed", "0",
         "--results", str(tmp_path / "results")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
    )  # fmt: skip
    assert proc.stdout is not None
    proc.stdout.readline()  # like `| head -1`: one line, then gone
    proc.stdout.close()
    assert proc.wait(timeout=120) == 130  # the run's echo survived; Ctrl-C's status


@contextmanager
def read_only(folder: Path) -> Iterator[None]:
    """`folder` read-only for this process: its mode for a user, a read-only bind mount for
    root (whom mode bits do not stop); skipped where neither can be had."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        try:
            yield
        finally:
            folder.chmod(0o755)
        return
    bind = subprocess.run(["mount", "--bind", str(folder), str(folder)], capture_output=True)
    if bind.returncode != 0:
        pytest.skip(f"cannot bind-mount as root here: {bind.stderr.decode().strip()}")
    try:
        ro = ["mount", "-o", "remount,bind,ro", str(folder)]
        if subprocess.run(ro, capture_output=True).returncode != 0:
            pytest.skip("cannot remount a bind mount read-only here")
        yield
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def test_a_read_only_results_folder_is_refused_before_any_work(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    env = {**os.environ, "ARI_HOME": str(tmp_path / "home")}
    with read_only(results):
        out = subprocess.run(
            [sys.executable, "-c", CLI, "run", "--agent", "scripted", "--seed", "0",
             "--results", str(results)],
            capture_output=True, text=True, env=env, timeout=120,
        )  # fmt: skip
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "cannot write in" in lines[0], out.stderr
    assert list(results.iterdir()) == []
    runs = tmp_path / "home" / "runs"
    assert not runs.exists() or not any(runs.iterdir())


# `toolkit run` whose run is stopped by `toolkit runs kill` (SIGTERM) once it has recorded
# itself, as the harness does: what the command says on the run's own terminal.
KILLED_RUN = """
import json, sys
sys.path.insert(0, sys.argv.pop(1))
from results_factory import run_dict
import toolkit.commands.run as run
from toolkit.run.interrupt import Interrupted

def execute_run(spec, *, echo, tick, **_):
    reason = "the run was interrupted during the agent's session (the operator: toolkit runs kill)"
    data = run_dict(spec.run_id, track=spec.track.id, status="invalid", status_reason=reason)
    folder = spec.results_dir / spec.track.id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{spec.run_id}.json").write_text(json.dumps(data))
    from toolkit.run.recovery import runs_root
    from toolkit.state import PIDS
    harness = runs_root() / spec.run_id / "harness"  # a finished run's: pids, no marker
    harness.mkdir(parents=True)
    (harness / PIDS).write_text("")
    raise Interrupted("SIGTERM", 143)

run.execute_run = execute_run
from toolkit.cli import cli
cli(sys.argv[1:])
"""


def test_a_killed_run_says_why_on_its_own_terminal(tmp_path: Path) -> None:
    factory = str(Path(__file__).resolve().parents[1] / "stats")
    env = {**os.environ, "ARI_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [sys.executable, "-c", KILLED_RUN, factory, "run", "--agent", "scripted", "--seed", "0",
         "--results", str(tmp_path / "results")],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 143, done.stdout + done.stderr
    said = done.stdout + done.stderr
    assert "invalid" in said and "(the operator: toolkit runs kill)" in said, said
    runs = tmp_path / "home" / "runs"  # its workspace went with it, as after a run that ends
    assert runs.is_dir() and not any(runs.iterdir())
