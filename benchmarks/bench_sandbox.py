"""What a sandboxed command costs over running it directly (local backend).

Prints the median wall time of many `true` runs: directly with subprocess, then through
`Sandbox.exec` with full isolation, without the network namespace, and as a host without
namespaces or cgroups would run it, and with an ephemeral root (the grader's: an overlay
mounted per command); plus `start` + a JSON-lines round trip. Each line gives
the added milliseconds and the ratio to the direct run measured in the same process.

    .venv/bin/python benchmarks/bench_sandbox.py [--runs 40]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from timing import median_s  # benchmarks/timing.py (the script's own folder)

from toolkit.protected import protected_paths
from toolkit.sandbox import Limits, LineReader, Sandbox, create_sandbox
from toolkit.sandbox.local import host as local_host

ECHO = "import sys\nfor line in sys.stdin:\n    sys.stdout.write(line)\n    sys.stdout.flush()\n"


def _fork_exit_wait() -> None:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


def _paired(first: Sandbox, second: Sandbox, runs: int) -> tuple[float, float]:
    """Median seconds of `true` in each sandbox, run in turns (after one warm-up each)."""
    times: tuple[list[float], list[float]] = ([], [])
    for index in range(runs + 1):
        for box, out in ((first, times[0]), (second, times[1])):
            started = time.perf_counter()
            box.exec(["true"])
            if index:
                out.append(time.perf_counter() - started)
    return statistics.median(times[0]), statistics.median(times[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=40)
    runs = parser.parse_args().runs
    work = Path(tempfile.mkdtemp(prefix="ari-bench-sandbox-"))
    direct = median_s(lambda: subprocess.run(["true"], check=True), runs)
    print(f"direct `true`: {direct * 1000:.1f} ms (median of {runs})")
    # A sandboxed command takes three process hand-offs (launcher -> init -> command); on a
    # busy host each costs a scheduling delay. This shows what one costs here, now.
    fork = median_s(_fork_exit_wait, runs)
    print(f"reference: fork + exit + wait of this Python process: {fork * 1000:.2f} ms")

    def report(label: str, seconds: float) -> None:
        added = (seconds - direct) * 1000
        print(f"{label}: {seconds * 1000:.1f} ms, +{added:.1f} ms, x{seconds / direct:.1f}")

    # As a run's roles have it: the checkout, the packages and $ARI_HOME hidden, the
    # interpreter (a venv in the hidden checkout, pyenv under /root) shown read-only again.
    hidden = {"hide": protected_paths()}
    # A grading's sandbox: an ephemeral root (an overlay per command) with a disk cap.
    grader = {**hidden, "ephemeral_root": True, "limits": Limits(disk_bytes=2**30)}
    for label, kwargs in (
        ("sandbox exec `true` (full isolation)", {}),
        ("sandbox exec `true` (network allowed)", {"network": True}),
        ("sandbox exec `true` (protected paths hidden)", hidden),
        ("sandbox exec `true` (ephemeral root)", {"ephemeral_root": True}),
        ("sandbox exec `true` (hidden + ephemeral root + disk cap)", grader),
    ):
        root = Path(tempfile.mkdtemp(dir=work))
        with create_sandbox("local", root=root, **kwargs) as box:  # type: ignore[arg-type]
            report(label, median_s(lambda box=box: box.exec(["true"]), runs))
            print(f"  isolation: {', '.join(box.isolation)}")

    # The same two sandboxes taking turns, so that the host's load hits both alike: what the
    # grader's overlay adds to a command.
    plain_box = create_sandbox("local", root=Path(tempfile.mkdtemp(dir=work)), **hidden)
    overlay_box = create_sandbox("local", root=Path(tempfile.mkdtemp(dir=work)), **grader)
    with plain_box, overlay_box:
        plain, overlay = _paired(plain_box, overlay_box, runs * 2)
    print(
        f"ephemeral root, paired with the same sandbox without it: {overlay * 1000:.1f} ms "
        f"vs {plain * 1000:.1f} ms, +{(overlay - plain) * 1000:.2f} ms, x{overlay / plain:.2f}"
    )

    real_probe = local_host.probe
    degraded = local_host.HostSupport(False, False, False, pids_parent=None, memory_parent=None)
    local_host.probe = lambda: degraded  # type: ignore[assignment]
    try:
        with create_sandbox("local", root=Path(tempfile.mkdtemp(dir=work))) as box:
            report(
                "sandbox exec `true` (no namespaces/cgroups)",
                median_s(lambda: box.exec(["true"]), runs),
            )
    finally:
        local_host.probe = real_probe  # type: ignore[assignment]

    with create_sandbox("local", root=Path(tempfile.mkdtemp(dir=work))) as box:
        box.write_file("echo.py", ECHO.encode())
        process = box.start([sys.executable, "echo.py"], stderr=False)
        assert process.stdin is not None and process.stdout is not None
        reader = LineReader(process.stdout)

        def round_trip() -> None:
            assert process.stdin is not None
            process.stdin.write(json.dumps({"prompt": "x" * 1024}).encode() + b"\n")
            process.stdin.flush()
            reader.readline(timeout=30)

        trip_us = median_s(round_trip, runs * 5) * 1e6
        print(f"JSON-lines round trip over start() pipes: {trip_us:.0f} us")
        started = time.perf_counter()
        box.cleanup()
        print(f"cleanup of a live process: {(time.perf_counter() - started) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
