"""Red-team: the bundle code of a public scoring is agent compute, and must end with the run.

`runner submit` scores the candidate on the public set in a grading sandbox: the bundle's
`load()` and `generate()` run there, for up to the track's load and phase limits (300 s +
1800 s on the official track), whatever the per-call limit, the reserved window or the deadline
say. The service closes the call at its limit and at the end of the run, but the scoring thread
and its worker go on: the agent's code keeps running after the deadline, side by side with the
final grading of its promoted candidate (a live sandbox beside the one that holds the exam),
and until the harness process itself exits.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from pathlib import Path

from tests.processes import survivors
from tests.run.conftest import MAKE_BUNDLE, ShellAgent, SpecFactory
from toolkit.run.orchestrate import execute_run

TOKEN = f"8{secrets.randbelow(10**8):08d}.{os.getpid()}"  # a sleep's length, unique to this run


def test_public_scoring_of_a_late_submit_ends_with_the_run(make_spec: SpecFactory) -> None:
    script = f"""{MAKE_BUNDLE}
runner submit bundles/triv && runner promote c001
mkdir -p bundles/slow
cat > bundles/slow/inference.py <<'PYEOF'
import subprocess, time
def load(bundle_dir, device):
    subprocess.Popen(["sleep", "{TOKEN}"])
    time.sleep(100)
PYEOF
runner submit bundles/slow &
sleep 3
"""
    spec = make_spec(ShellAgent(script), budget=30, per_call=10, reserved=3)
    try:
        result = execute_run(spec)
        assert result.status == "valid", result.status_reason
        alive = survivors(TOKEN, wait_s=2.0)
        assert alive == [], f"the agent's bundle code still runs after the run: {alive}"
    finally:
        for line in survivors(TOKEN, wait_s=0):  # the sleep and the worker that started it
            pid = line.split(":")[0]
            status = Path(f"/proc/{pid}/status").read_text()
            ppid = next(ln.split()[1] for ln in status.splitlines() if ln.startswith("PPid:"))
            for victim in (int(ppid), int(pid)):
                if victim > 1:
                    with contextlib.suppress(OSError):
                        os.kill(victim, 9)


def test_public_scoring_stops_at_the_calls_limit(make_spec: SpecFactory) -> None:
    """A submit is a call like any other: when it reaches the per-call limit, the bundle's code
    scoring it is killed there and then, not when the run ends (the agent sleeps on after it)."""
    token = "9" + TOKEN[1:]  # its own: TOKEN + "1" would hold TOKEN, and each test see both
    script = f"""{MAKE_BUNDLE}
runner submit bundles/triv && runner promote c001
mkdir -p bundles/slow
cat > bundles/slow/inference.py <<'PYEOF'
import subprocess, time
def load(bundle_dir, device):
    subprocess.Popen(["sleep", "{token}"])
    time.sleep(100)
PYEOF
runner submit bundles/slow; echo "submit exited $?"
sleep 1
runner submit bundles/triv
sleep 2
"""
    spec = make_spec(ShellAgent(script), budget=40, per_call=6, reserved=3)
    try:
        result = execute_run(spec)
        assert result.status == "valid", result.status_reason
        run_dir = spec.results_dir / spec.track.id / result.run_id
        assert "submit exited 124" in (run_dir / "transcript.txt").read_text()
        history = [
            json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()
        ]
        order = [(e["kind"], e["id"]) for e in history]
        public = [e for e in history if e["kind"] == "public" and e["id"] == "c002"]
        assert public and "grading cancelled" in (public[0]["error"] or ""), public
        # Ended with its call, before the next submit (not when the run was over).
        assert order.index(("public", "c002")) < order.index(("submit", "c003")), order
        assert survivors(token, wait_s=2.0) == []
    finally:
        for line in survivors(token, wait_s=0):
            with contextlib.suppress(OSError):
                os.kill(int(line.split(":")[0]), 9)


def test_concurrent_submits_are_scored_one_at_a_time(make_spec: SpecFactory) -> None:
    """Each public scoring may take the track's whole memory cap (and the GPU): an agent that
    submits many bundles at once must not run their code side by side. Three bundles whose
    load() sleeps 2 s, submitted together, take at least 6 s to be scored, and all are."""
    script = """mkdir -p bundles/nap
cat > bundles/nap/inference.py <<'PYEOF'
import time
class Model:
    def generate(self, prompts, lengths):
        return [b" " * n for n in lengths]
def load(bundle_dir, device):
    time.sleep(2)
    return Model()
PYEOF
start=$(date +%s.%N)
runner submit bundles/nap > s1 & runner submit bundles/nap > s2 & runner submit bundles/nap > s3 &
wait
end=$(date +%s.%N)
echo "three submits took $(awk "BEGIN{print $end - $start}")"
cat s1 s2 s3
"""
    spec = make_spec(ShellAgent(script), budget=60, per_call=30, reserved=3)
    result = execute_run(spec)
    assert result.status == "failed", result.status_reason  # nothing promoted
    transcript = (spec.results_dir / spec.track.id / result.run_id / "transcript.txt").read_text()
    took = float(transcript.split("three submits took ")[1].split()[0])
    assert took >= 6.0, f"three 2 s loads were scored side by side ({took:.1f} s): {transcript}"
    assert [c.public_score for c in result.candidates] == [0.0, 0.0, 0.0], transcript
