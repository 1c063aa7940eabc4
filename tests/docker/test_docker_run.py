"""Whole runs on the docker backend: three containers, the runner FIFOs across them, the clock.

The scripted run is the issue's acceptance test (`toolkit run --backend docker`, validated by
`toolkit runs validate`); the hostile agent checks that the deadline stops all three containers
within 2 s whatever the agent's processes do with signals, and that nothing is left behind.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import time
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from tests.docker.conftest import ShellAgent, SpecFactory, containers_of
from tests.processes import survivors
from toolkit.cli import cli
from toolkit.run.orchestrate import execute_run

REPO = Path(__file__).resolve().parents[2]
# A sleep's length only this test's processes carry (another session's suite on this host has
# its own).
TOKEN = f"8{secrets.randbelow(10**8):08d}.{os.getpid()}"


def test_scripted_run_on_docker_end_to_end(tmp_path: Path, client: Any) -> None:
    results = tmp_path / "results"
    results.mkdir()
    (results / "tracks.json").write_bytes((REPO / "results" / "tracks.json").read_bytes())
    (results / "protocol_fixes.json").write_bytes(
        (REPO / "results" / "protocol_fixes.json").read_bytes()
    )
    runner = CliRunner()
    done = runner.invoke(
        cli,
        [
            "run", "--agent", "scripted", "--backend", "docker",
            "--track", "demo-cpu-3", "--seed", "0", "--budget", "75", "--quiet",
            "--results", str(results), "--cpus", "1.5",
        ],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    files = sorted((results / "demo-cpu-3").glob("*.json"))
    assert len(files) == 1
    result = json.loads(files[0].read_text())
    assert result["status"] == "valid", result["status_reason"]
    assert result["promoted"] is not None and result["score"]["total"] == 100
    config = result["config"]
    assert config["backend"] == "docker"
    digests = config["image_digests"]
    assert set(digests) == {"controller", "runner", "grader"}
    assert all(re.fullmatch(r".+@sha256:[0-9a-f]{64}", d) for d in digests.values()), digests
    assert digests["grader"] == digests["runner"] != digests["controller"]
    assert "controller:no-python-image" in config["isolation"]
    assert "runner:netns" in config["isolation"] and "runner:hidden-paths" in config["isolation"]
    assert "runner:cpu-quota" in config["isolation"] and result["placement"]["cpus"] == 1.5
    validate = runner.invoke(cli, ["runs", "validate", str(results)])
    assert validate.exit_code == 0, validate.output
    assert containers_of(client, **{"ari.run": result["run_id"]}) == []
    audit = (files[0].parent / result["run_id"] / "audit.jsonl").read_text().splitlines()
    calls = [json.loads(line)["argv"][0] for line in audit]
    assert calls[:2] == ["time_left", "python"] and "submit" in calls and "promote" in calls


def test_deadline_stops_every_container_whatever_the_agent_does(
    make_spec: SpecFactory, client: Any
) -> None:
    script = f"""trap '' TERM INT HUP
(trap '' TERM; exec sleep {TOKEN}) &
setsid sh -c "trap '' TERM; sleep {TOKEN}" &
runner sh -c "trap '' TERM; (setsid sleep {TOKEN} &); sleep {TOKEN}" &
while :; do sleep 1; done
"""
    spec = make_spec(ShellAgent(script), budget=8, per_call=8, reserved=1)
    started: list[float] = []
    result = execute_run(spec, tick=lambda e, t: started.append(time.monotonic()) or None)
    ended = time.monotonic()
    assert result.status == "failed" and "(deadline)" in (result.status_reason or "")
    assert ended - started[0] <= 8 + 2 + 5, f"the run took {ended - started[0]:.1f}s"
    log = (spec.results_dir / "demo-cpu-3" / result.run_id / "agent.log").read_text()
    took = float(re.search(r"stopped everything in ([0-9.]+)s", log).group(1))  # type: ignore[union-attr]
    assert took < 2.0, log
    assert survivors(TOKEN, wait_s=1.0) == []
    assert containers_of(client, **{"ari.run": result.run_id}) == []


def test_an_interrupted_run_removes_its_containers(tmp_path: Path, client: Any) -> None:
    """SIGTERM (as Ctrl-C) mid-run: the run is recorded invalid and its containers are gone."""
    import signal
    import subprocess
    import sys

    results = tmp_path / "results"
    results.mkdir()
    (results / "tracks.json").write_bytes((REPO / "results" / "tracks.json").read_bytes())
    command = (
        "from toolkit.cli import main; main()",
        *["run", "--agent", "scripted", "--backend", "docker"],
        *["--track", "demo-cpu-3", "--seed", "0", "--budget", "120", "--quiet"],
        *["--results", str(results)],
    )
    process = subprocess.Popen(
        [sys.executable, "-c", *command],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    mine: list[dict[str, Any]] = []
    while time.monotonic() < deadline and len(mine) < 2:  # the runner and the controller
        mine = [
            c
            for c in containers_of(client)
            if c["Labels"].get("ari.owner", "").startswith(f"{process.pid}:")
        ]
        time.sleep(0.2)
    assert len(mine) >= 2, "the run never started its containers"
    time.sleep(3)  # the agent is working
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) != 0
    run_id = mine[0]["Labels"]["ari.run"]
    assert containers_of(client, **{"ari.run": run_id}) == []
    result = json.loads(next((results / "demo-cpu-3").glob("*.json")).read_text())
    assert result["status"] == "invalid" and "interrupted" in result["status_reason"]
