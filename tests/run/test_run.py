"""Whole runs with test agents: the deadline, failure without promotion, leaks, crash recovery."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.processes import survivors
from tests.run.conftest import MAKE_BUNDLE, ShellAgent, SpecFactory
from toolkit.agents import ScriptedAgent
from toolkit.cli import cli
from toolkit.grading.grade import host_memory_bytes
from toolkit.results.chain import read_chain
from toolkit.results.model import load_run
from toolkit.run.orchestrate import execute_run
from toolkit.run.recovery import MARKER, recover_runs, runs_root
from toolkit.sandbox import capped
from toolkit.sandbox.local import host as local_host
from toolkit.stats.rules import rule_differences

REPO = Path(__file__).resolve().parents[2]
# An argument only this test run's processes carry (a sleep's length, so a number): unique per
# run, so that suites running side by side on one host never take each other's for survivors.
TOKEN = f"9{secrets.randbelow(10**8):08d}.{os.getpid()}"


def test_deadline_stops_an_agent_that_ignores_sigterm_and_forks(make_spec: SpecFactory) -> None:
    script = f"""trap '' TERM INT HUP
(trap '' TERM; exec sleep {TOKEN}) &
setsid sh -c "trap '' TERM; sleep {TOKEN}" &
runner sh -c "trap '' TERM; sleep {TOKEN}" &
while :; do sleep 1; done
"""
    spec = make_spec(ShellAgent(script), budget=5, per_call=5, reserved=1)
    ticks: list[float] = []
    result = execute_run(
        spec, tick=lambda e, t: ticks.append(time.monotonic()) if not ticks else None
    )
    ended = time.monotonic()
    assert ended - ticks[0] <= 5 + 2, f"the run ended {ended - ticks[0]:.2f}s after it started"
    assert result.status == "failed" and result.score.passed == 0
    assert "no candidate was promoted (deadline)" in (result.status_reason or "")
    assert survivors(TOKEN, wait_s=1.0) == []


def test_an_agent_cannot_fill_the_disk_through_its_workspace(make_spec: SpecFactory) -> None:
    """A hostile agent writing file after file through `runner` (each under the per-file cap)
    stops at the track's workspace cap; the workspace's filesystem is gone after the run."""
    reason = capped.unavailable("ext4")
    if reason is not None:
        pytest.skip(f"this host cannot cap a workspace ({reason}): the run records root-disk")
    cap = 64 * 2**20
    hog = "i=0; while head -c 4000000 /dev/zero > hog-$i.bin; do i=$((i+1)); done; echo files=$i"
    # Full, the agent's own `runner` calls fail (they need a file or two in the workspace) until
    # it makes room in its shell; the harness's answer to the filling call still arrives.
    script = f"""runner sh -c '{hog}; echo size=$(df -B1 --output=size . | tail -1)'
echo "hog call exit $?"
ls hog-0.bin && rm hog-*.bin
runner sh -c 'echo room again > note.txt && cat note.txt'
"""
    spec = make_spec(ShellAgent(script), budget=60, per_call=30, reserved=5)
    spec.track = spec.track.model_copy(update={"workspace_disk_bytes": cap})
    free = shutil.disk_usage(runs_root().parent.parent).free
    result = execute_run(spec)
    transcript = (spec.results_dir / "demo-cpu-3" / result.run_id / "transcript.txt").read_text()
    files = int(transcript.split("files=")[1].split()[0])
    size = int(transcript.split("size=")[1].split()[0])
    assert 0 < files * 4_000_000 <= cap and size <= cap, transcript
    assert "hog call exit 0" in transcript and "room again" in transcript
    assert "runner:root-disk-cap" in result.config.isolation
    workspace = runs_root() / result.run_id / "workspace"
    assert not os.path.ismount(workspace) and not capped.image_of(workspace).exists()
    assert shutil.disk_usage(runs_root().parent.parent).free > free - 256 * 2**20


def test_no_promotion_fails_with_zero_and_workspace_holds_no_secret(
    make_spec: SpecFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-test-0123456789abcdef"
    monkeypatch.setenv("FAKE_PROVIDER_API_KEY", secret)
    spec = make_spec(ShellAgent(""), budget=60, per_call=30, reserved=5, secrets=[secret])
    # Read after the run below: no size cap, whose filesystem (and files) go with the run.
    spec.track = spec.track.model_copy(update={"workspace_disk_bytes": None})
    exam_path = spec.exam
    script = f"""{MAKE_BUNDLE}
env > env-controller.txt
runner sh -c 'env' > env-runner.txt
cat {exam_path} > exam-peek.txt 2>&1
runner cat {exam_path} > exam-peek-runner.txt 2>&1
ls -R {spec.results_dir} > results-peek.txt 2>&1
command -v python python3 > python-peek.txt 2>&1
runner submit bundles/triv
"""
    spec.agent = ShellAgent(script)
    result = execute_run(spec)
    assert result.status == "failed" and result.score.percent == 0
    assert result.status_reason and "no candidate was promoted" in result.status_reason
    assert [c.id for c in result.candidates] == ["c001"]
    assert result.promoted is None
    workspace = runs_root() / result.run_id / "workspace"
    exam_lines = exam_path.read_text().splitlines()
    for path in workspace.rglob("*"):
        if path.is_file() and not path.is_symlink():
            text = path.read_bytes().decode(errors="replace")
            assert secret not in text, path
            assert not any(line in text for line in exam_lines[:5]), path
    assert (workspace / "exam-peek.txt").read_text().strip() != ""  # it tried, and saw nothing
    assert (workspace / "python-peek.txt").read_text().strip() == ""  # no python in controller
    bank_files = list(Path(__file__).resolve().parents[2].glob("exam_builder/banks/**/*.toml"))
    names = {p.name for p in workspace.rglob("*")}
    assert not any(b.name in names for b in bank_files)
    saved = load_run(spec.results_dir / "demo-cpu-3" / f"{result.run_id}.json")
    assert saved == result


def test_harness_killed_is_recorded_invalid_and_nothing_is_lost(
    make_spec: SpecFactory, tmp_path: Path
) -> None:
    spec = make_spec(ShellAgent(""), budget=120, per_call=60, reserved=5)
    script = f"""{MAKE_BUNDLE}
runner submit bundles/triv
runner promote c001
runner sh -c "sleep {TOKEN}" &
sleep {TOKEN}
"""
    spec.agent = ShellAgent(script)
    pickled = tmp_path / "spec.pkl"
    import pickle

    pickled.write_bytes(pickle.dumps(spec))
    harness = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import pickle,sys; from toolkit.run.orchestrate import execute_run; "
            "execute_run(pickle.loads(open(sys.argv[1],'rb').read()))",
            str(pickled),
        ],
        env=os.environ.copy(),
    )
    history = None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        found = list(spec.results_dir.glob("demo-cpu-3/*/history.jsonl"))
        promoted = found and any(e["kind"] == "promote" for e in read_chain(found[0]))
        if promoted and survivors(TOKEN):
            history = found[0]
            break
        time.sleep(0.2)
    assert history is not None, "the agent never submitted and promoted"
    before = history.read_bytes()
    audit = history.parent / "audit.jsonl"
    audit_before = audit.read_bytes()
    harness.send_signal(signal.SIGKILL)
    harness.wait()
    workspace = runs_root() / history.parent.name / "workspace"
    capped_before = os.path.ismount(workspace)  # where the host can cap one
    # Whatever else the run folder holds (a scaffold's event stream, say) is listed too.
    (history.parent / "events.jsonl").write_text('{"event": "tool"}\n')
    # The next toolkit command that looks (here `toolkit runs recover`) records it.
    done = CliRunner().invoke(cli, ["runs", "recover"])
    assert done.exit_code == 0, done.output
    written = list(spec.results_dir.glob("demo-cpu-3/*.json"))
    assert len(written) == 1 and str(written[0]) in done.output.replace("\n", "")
    result = load_run(written[0])
    listed = {"audit", "history", "transcript", "agent_log", "events"}
    assert set(result.artifacts) == listed, result.artifacts
    assert "artifacts kept: agent_log, audit, events, history, transcript" in done.output
    for rel in result.artifacts.values():
        assert (written[0].parent / rel).is_file(), rel
    assert result.status == "invalid"
    assert (
        result.status_reason
        and "harness" in result.status_reason
        and "died" in result.status_reason
    )
    assert result.evidence is not None and result.evidence.check == "harness-died"
    assert not list(spec.results_dir.glob("demo-cpu-3/.*.reserve"))  # the dead harness's reserve
    assert CliRunner().invoke(cli, ["runs", "validate", str(written[0])]).exit_code == 0
    assert [c.id for c in result.candidates] == ["c001"]
    assert result.promoted is not None and result.promoted.id == "c001"
    assert history.read_bytes() == before
    assert audit.read_bytes().startswith(audit_before)
    read_chain(audit)
    assert survivors(TOKEN, wait_s=1.0) == []
    assert not list(runs_root().glob(f"*/harness/{MARKER}"))
    # The workspace's size cap the dead harness left mounted: unmounted, its image gone.
    assert capped_before == (capped.unavailable("ext4") is None)
    assert not os.path.ismount(workspace) and not capped.image_of(workspace).exists()
    assert recover_runs() == []  # handled once


@pytest.mark.slow
def test_scripted_run_end_to_end(make_spec: SpecFactory) -> None:
    # 30 steps of training: the run crosses every step of a real one (train, submit, promote,
    # grade) for a fixed amount of work, where a time share made a loaded box's run no cheaper.
    agent = ScriptedAgent(max_steps=30)
    spec = make_spec(agent, budget=100, per_call=60, reserved=10, cpus=1.5)
    result = execute_run(spec)
    assert result.status in ("valid", "failed"), result.status_reason
    # A CPU quota for the runner and the gradings: recorded, and enforced where the host can.
    assert result.placement is not None and result.placement.cpus == 1.5
    if local_host.probe().cpu_parent is not None:
        assert "runner:cgroup-cpu" in result.config.isolation
    path = spec.results_dir / "demo-cpu-3" / f"{result.run_id}.json"
    assert load_run(path) == result
    assert result.candidates and result.promoted is not None, result.status_reason
    assert result.status == "valid"
    assert result.timings.grading_s is not None
    assert result.score.total == 100
    assert result.bits_per_byte is not None
    artifacts = path.parent / result.run_id
    for name in ("audit.jsonl", "history.jsonl", "transcript.txt", "agent.log"):
        assert (artifacts / name).is_file(), name
    assert "[scripted] done: promoted c001" in (artifacts / "transcript.txt").read_text()
    # The promoted bundle's code, published with the run for a reviewer (issue 28).
    code = (artifacts / "promoted-code.txt").read_text()
    assert result.artifacts["promoted_code"] == f"{result.run_id}/promoted-code.txt"
    assert "Candidate c001" in code and "inference.py" in code and "def generate" in code
    assert json.loads(path.read_text())["config"]["budget"]["overridden"] == 1
    # What the site reads: the result and its artifacts pass the site's own loader.
    for name in ("tracks.json", "protocol_fixes.json"):
        shutil.copy(REPO / "results" / name, spec.results_dir / name)
    done = CliRunner().invoke(cli, ["runs", "validate", str(spec.results_dir)])
    assert done.exit_code == 0, done.output


def test_history_altered_during_the_run_makes_it_invalid(make_spec: SpecFactory) -> None:
    script = f"""{MAKE_BUNDLE}
runner submit bundles/triv
runner promote c001
echo TAMPER-NOW
sleep 2
"""
    spec = make_spec(ShellAgent(script), budget=60, per_call=30, reserved=5)

    tampered: list[bool] = []

    def tamper(line: str) -> None:
        # Someone with access to the host edits the public score of c001 mid-run.
        if line == "TAMPER-NOW":
            (history,) = spec.results_dir.glob("demo-cpu-3/*/history.jsonl")
            text = history.read_text()
            edited = text.replace('"public_score": 0.0', '"public_score": 99.0')
            history.write_text(edited)
            tampered.append(edited != text)

    result = execute_run(spec, echo=tamper)
    assert tampered == [True]
    assert result.status == "invalid"
    assert result.status_reason and "altered during the run" in result.status_reason


def test_relative_state_dir_and_an_agent_that_never_calls_runner(
    make_spec: SpecFactory, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`ARI_HOME` given relative (as `make demo` does) still reaches the controller's PATH, and
    a run without any runner call publishes a result that validates (no dangling artifacts)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ARI_HOME", "relative-home")
    spec = make_spec(
        ShellAgent("echo agent-ran-here\nexit 3\n"), budget=20, per_call=10, reserved=2
    )
    result = execute_run(spec)
    assert result.status == "failed"
    assert "exited with status 3" in (result.status_reason or "")
    assert "audit" not in result.artifacts
    path = spec.results_dir / result.track / f"{result.run_id}.json"
    for rel in load_run(path).artifacts.values():
        assert (path.parent / rel).is_file(), rel
    assert "agent-ran-here" in (path.parent / result.artifacts["transcript"]).read_text()


def test_a_grading_memory_cap_above_the_host_is_recorded_as_lowered(
    make_spec: SpecFactory,
) -> None:
    """The effective config says what grading ran under, not what the track asked for, and
    agent.log says why they differ (the run is then off the track's rules, and listed so)."""
    spec = make_spec(ShellAgent("exit 0\n"), budget=20, per_call=10, reserved=2)
    asked = 1 << 50  # a petabyte: more than any host here has
    grading = spec.track.grading.model_copy(update={"memory_bytes": asked})
    spec.track = spec.track.model_copy(update={"grading": grading})
    result = execute_run(spec)
    in_force = host_memory_bytes()
    assert result.config.grading["memory_bytes"] == in_force < asked
    log = (spec.results_dir / result.track / result.run_id / "agent.log").read_text()
    assert "grading: memory cap lowered from 1048576.0 GiB" in log
    grading_differences = [
        d for d in rule_differences(result, spec.track) if d.startswith("grading")
    ]  # (this test's budget is off the track's too)
    assert len(grading_differences) == 1 and "memory_bytes" in grading_differences[0]
