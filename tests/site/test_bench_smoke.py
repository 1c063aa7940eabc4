"""benchmarks/bench_site.py still runs (on a tiny board: the real sizes are for `make bench`)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from site_fixture import REPO


@pytest.mark.slow
def test_bench_site_runs_small() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_site.py"),
         "--runs", "90", "--rows", "9", "--tracks", "3"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "statistics      :" in done.stdout and "mkdocs build    :" in done.stdout
