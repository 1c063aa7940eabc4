"""What a `runner` call adds over running the same command directly.

Median wall time of many calls of `true`, measured four ways in the same process:
  direct      `true` as a host subprocess (the reference);
  sandbox     `true` started in the runner sandbox (what every compute call pays for isolation);
  runner      `runner true` through the shell client, the FIFO channel, the runner service
              and the runner sandbox (what the agent sees);
  time_left   `runner time_left` (the channel alone: no sandbox process is started).
Each line prints the median in ms, the ms added over `direct`, and the ratio to it.
The target for `runner` is under 50 ms added.

    .venv/bin/python benchmarks/bench_runner.py [--runs 40]
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from pathlib import Path

from timing import median_s  # benchmarks/timing.py (the script's own folder)

from toolkit.clock import Clock
from toolkit.results.chain import ChainedLog
from toolkit.runner.channel import make_channel
from toolkit.runner.client import install_client
from toolkit.runner.service import RunnerService
from toolkit.sandbox import create_sandbox


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        ws.mkdir()
        channel = ws / ".runner"
        make_channel(channel)
        client = str(install_client(channel / "bin", channel))
        box = create_sandbox("local", root=ws, hide=[channel])
        service = RunnerService(
            channel=channel,
            clock=Clock(budget_s=3600, reserved_s=300, per_call_limit_s=1200),
            audit=ChainedLog(Path(tmp) / "audit.jsonl"),
            start_process=lambda argv: box.start(argv, stdin=False),
        )
        service.start()

        def run(argv: list[str]) -> None:
            subprocess.run(argv, cwd=ws, capture_output=True, check=True)

        def sandboxed() -> None:
            process = box.start(["true"], stdin=False, stdout=False, stderr=False)
            process.wait()

        try:
            direct = median_s(lambda: run(["true"]), args.runs)
            rows = [
                ("direct", direct),
                ("sandbox", median_s(sandboxed, args.runs)),
                ("runner", median_s(lambda: run([client, "true"]), args.runs)),
                ("time_left", median_s(lambda: run([client, "time_left"]), args.runs)),
            ]
        finally:
            service.stop()
            box.cleanup()
    print(
        f"runner call overhead, median of {args.runs} calls (isolation: {', '.join(box.isolation)})"
    )
    for name, value in rows:
        print(
            f"  {name:<10} {value * 1000:8.1f} ms   +{(value - direct) * 1000:7.1f} ms   "
            f"x{value / direct:6.1f}"
        )
    added = (dict(rows)["runner"] - direct) * 1000
    verdict = "met" if added < 50 else "NOT met"
    print(f"runner adds {added:.1f} ms over `true` (target < 50 ms: {verdict})")
    sandbox_ms = (dict(rows)["sandbox"] - direct) * 1000
    print(
        f"  of which the runner sandbox itself: {sandbox_ms:.1f} ms; channel + service: "
        f"{added - sandbox_ms:.1f} ms"
    )


if __name__ == "__main__":
    main()
