"""`make demo` (scripts/demo.sh): Ctrl-C stops it, and an interrupted seed is rerun first.

The demo runs here with a stand-in `toolkit` (its run stops the way a real one does on
Ctrl-C: SIGINT to the demo, exit status 130), so the test takes a second and needs no run.
"""

from __future__ import annotations

import importlib.util
import json
import signal
import subprocess
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]

FAKE_TOOLKIT = """#!/usr/bin/env bash
echo "$* ARI_HOME=${ARI_HOME:-}" >> "$CALLS"
case "$1" in
    build-exam)
        while [ "$#" -gt 0 ]; do [ "$1" = --out ] && out=$2; shift; done
        mkdir -p "$out" && touch "$out/exam.jsonl" ;;
    run)
        if [ -n "${STOP_THE_RUN:-}" ]; then
            kill -INT "$PPID"  # Ctrl-C reaches the whole foreground group: the demo too
            exit 130
        fi
        while [ "$#" -gt 0 ]; do [ "$1" = --results ] && results=$2; shift; done
        mkdir -p "$results/demo-cpu-3"
        echo '{"seed": 0, "status": "valid"}' > "$results/demo-cpu-3/run0.json" ;;
esac
"""


def _seed_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("demo_seed", REPO / "scripts" / "demo-seed.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _result(folder: Path, name: str, seed: int, status: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps({"seed": seed, "status": status}))


def test_an_interrupted_seed_is_rerun_before_a_new_one(tmp_path: Path) -> None:
    next_seed = _seed_module().next_seed
    track = tmp_path / "demo-cpu-3"
    assert next_seed(track) == 0  # no folder yet
    _result(track, "a", 0, "valid")
    _result(track, "b", 1, "invalid")  # stopped with Ctrl-C
    _result(track, "c", 2, "failed")
    assert next_seed(track) == 1
    _result(track, "d", 1, "valid")  # its rerun: the invalid one is done with
    assert next_seed(track) == 3
    (track / "broken.json").write_text("{")
    assert next_seed(track) == 3


def _demo(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """scripts/demo.sh with the stand-in toolkit (its calls, one a line, in tmp_path/calls)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "toolkit").write_text(FAKE_TOOLKIT)
    mkdocs = 'echo "mkdocs $* ARI_HOME=${ARI_HOME:-}" >> "$CALLS"'
    (bin_dir / "mkdocs").write_text(f"#!/bin/sh\n{mkdocs}\n")
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path / "user"),
        "BIN": str(bin_dir),
        "DEMO_DIR": str(tmp_path / "demo"),
        "CALLS": str(tmp_path / "calls"),
        **env,
    }
    return subprocess.run(
        ["bash", str(REPO / "scripts" / "demo.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        # As from a terminal: SIGINT at its default even where the test runner ignores it.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def test_ctrl_c_during_the_run_stops_the_demo(tmp_path: Path) -> None:
    done = _demo(tmp_path, STOP_THE_RUN="1", ARI_HOME=str(tmp_path / "home"))
    calls = tmp_path / "calls"
    assert done.returncode == 130, done.stdout + done.stderr
    assert "demo interrupted" in done.stderr
    commands = [line.split()[0:2] for line in calls.read_text().splitlines()]
    assert commands[-1][0] == "run"  # nothing after the stopped run: no validate, no site
    assert "5/5" not in done.stdout and "demo finished" not in done.stdout


def test_the_demo_uses_the_state_folder_every_later_command_uses(tmp_path: Path) -> None:
    """The README's next commands (`toolkit leaderboard --results .ari/demo/results`, `runs
    validate`, `runs list`, `toolkit view`) run without ARI_HOME: the demo's run must be signed
    by, and journaled in, that same state folder, or they disagree with the site it built."""
    done = _demo(tmp_path)  # no ARI_HOME: the operator's default
    assert done.returncode == 0, done.stdout + done.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls and all(line.endswith(" ARI_HOME=") for line in calls), calls
    assert "toolkit leaderboard --results" in done.stdout
    # DEMO_DIR given absolute: the site goes there, not under the checkout.
    (site,) = [line for line in calls if line.startswith("mkdocs ")]
    assert f"--site-dir {tmp_path}/demo/site" in site, site


def test_an_older_demos_own_state_is_moved_aside_not_lost(tmp_path: Path) -> None:
    old_home = tmp_path / "demo" / "home" / "keys"
    old_home.mkdir(parents=True)
    (old_home / "result-signing.ed25519").write_text("old key")
    _result(tmp_path / "demo" / "results" / "demo-cpu-3", "old0", 0, "valid")
    done = _demo(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    (aside,) = (tmp_path / "demo").glob("results-old-key-*")
    assert (aside / "demo-cpu-3" / "old0.json").is_file()
    assert (aside / "home" / "keys" / "result-signing.ed25519").read_text() == "old key"
    assert not (tmp_path / "demo" / "home").exists()
    assert "moved to" in done.stderr
