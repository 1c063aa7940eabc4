"""benchmarks/bench_campaign.py still runs (local engine, short sleeps: real numbers come from
`make bench`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_bench_campaign_runs_small() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_campaign.py"),
         "--sleep", "0.3", "--engines", "local", "--slots", "1,2"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "local N=2:" in done.stdout and "speed-up" in done.stdout
