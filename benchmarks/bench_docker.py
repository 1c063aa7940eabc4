"""What the docker backend costs: a runner call over a bare `docker exec`, container start-up,
and grading in a container against the local backend.

Three numbers, each against a reference measured in the same run:
  runner call   `runner true` typed in the controller container (shell client, FIFOs across
                the bind mount, the runner service, a `docker exec` through ari-init in the
                runner container) against a bare `docker exec` of `true` into the same runner
                container through the engine's API; target: under 50 ms added. Also shown:
                the sandbox's own exec (no channel) and `runner time_left` (channel, no exec).
  start-up      a sandbox (container created, started, attached, first command answered),
                and its removal.
  grading       the same bundle (starter 'tiny' preset) on the 100-question demo exam, in
                containers and with the local backend; target: docker within 1.5x of local.

Needs a Docker engine with the images (`toolkit images build`); DOCKER_HOST picks it.

    python benchmarks/bench_docker.py [--runs 30] [--repeat 2]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from starter_bundle import fresh_bundle  # benchmarks/starter_bundle.py (the script's folder)
from timing import median_s  # benchmarks/timing.py (the script's own folder)

from toolkit.clock import Clock
from toolkit.images import current
from toolkit.results.chain import ChainedLog
from toolkit.runner.channel import make_channel
from toolkit.runner.client import install_client
from toolkit.runner.service import RunnerService
from toolkit.sandbox import Sandbox, SandboxError, create_sandbox
from toolkit.sandbox.docker import engine as docker_engine

REPO = Path(__file__).resolve().parents[1]

# Inside the controller: time each `runner ARGS` with the shell's own clock (ns).
LOOP = """i=0
while [ $i -lt {runs} ]; do
    a=$(date +%s%N); runner {args} >/dev/null 2>&1; b=$(date +%s%N)
    echo $((b - a)); i=$((i + 1))
done
"""


def bare_exec(box: Sandbox) -> None:
    """`true` exec'd straight into the container through the API: no wrapper, no pipes."""
    api = docker_engine.connect().api
    container = box.container  # type: ignore[attr-defined]
    created = api.exec_create(container, ["true"], user="65534:65534")
    api.exec_start(created["Id"])
    while api.exec_inspect(created["Id"])["Running"]:
        time.sleep(0.001)


def _loop_ms(controller: Sandbox, args: str, runs: int) -> float:
    loop = controller.exec(["sh", "-c", LOOP.format(runs=runs + 1, args=args)], timeout=600)
    if not loop.ok:
        raise SystemExit(f"runner loop failed: {loop.stderr.decode()[-300:]}")
    calls = [int(x) / 1e9 for x in loop.stdout.split()[1:]]  # the first one warms up
    return statistics.median(calls) * 1000


def runner_call_ms(runs: int) -> tuple[float, float, float, float]:
    """(bare docker exec, sandbox exec, runner true, runner time_left) medians in ms."""
    with tempfile.TemporaryDirectory(prefix="bench-docker-") as tmp:
        ws = Path(tmp) / "ws"
        ws.mkdir()
        channel = ws / ".runner"
        make_channel(channel)
        install_client(channel / "bin", channel)
        runner = create_sandbox("docker", root=ws, hide=[channel])
        controller = create_sandbox(
            "docker",
            root=ws,
            image=current().controller,
            env={"PATH": f"{channel / 'bin'}:/usr/bin:/bin"},
        )
        service = RunnerService(
            channel=channel,
            clock=Clock(budget_s=3600, reserved_s=300, per_call_limit_s=1200),
            audit=ChainedLog(Path(tmp) / "audit.jsonl"),
            start_process=lambda argv: runner.start(argv, stdin=False),
        )
        service.start()
        try:
            bare = median_s(lambda: bare_exec(runner), runs)
            wrapped = median_s(lambda: runner.exec(["true"]), runs)
            call = _loop_ms(controller, "true", runs)
            channel = _loop_ms(controller, "time_left", runs)
        finally:
            service.stop()
            runner.cleanup()
            controller.cleanup()
    return bare * 1000, wrapped * 1000, call, channel


def startup_s(runs: int) -> tuple[float, float]:
    """(start, removal) medians in seconds."""
    starts, stops = [], []
    with tempfile.TemporaryDirectory(prefix="bench-docker-") as tmp:
        for _ in range(runs):
            began = time.perf_counter()
            box = create_sandbox("docker", root=Path(tmp))
            box.exec(["true"])
            ready = time.perf_counter()
            box.cleanup()
            starts.append(ready - began)
            stops.append(time.perf_counter() - ready)
    return statistics.median(starts), statistics.median(stops)


def grading_s(repeat: int) -> tuple[float, float]:
    """(local, docker) median grading seconds of one bundle on the demo exam."""

    from exam_builder.build import build_exam
    from toolkit.grading import grade_bundle

    with tempfile.TemporaryDirectory(prefix="bench-docker-") as tmp:
        work = Path(tmp)
        fresh_bundle(work / "bundle", "tiny")
        build_exam(REPO / "exam_builder/banks/public/demo", work / "exam", english_text=None)
        exam = work / "exam" / "exam.jsonl"
        times: dict[str, list[float]] = {"local": [], "docker": []}
        for _ in range(repeat):
            for backend in times:
                began = time.perf_counter()
                report = grade_bundle(work / "bundle", exam, backend=backend)
                times[backend].append(time.perf_counter() - began)
                if not report.ok:
                    raise SystemExit(f"grading on {backend} failed: {report.reason}")
    return statistics.median(times["local"]), statistics.median(times["docker"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    try:
        docker_engine.connect()
    except SandboxError as exc:
        print(f"bench_docker: skipped: {exc}")
        return
    bare, wrapped, call, channel = runner_call_ms(args.runs)
    print(f"runner call, median of {args.runs} (engine: {docker_engine.socket_path()})")
    print(f"  bare docker exec (API)  {bare:7.1f} ms")
    print(f"  sandbox exec (ari-init) {wrapped:7.1f} ms   +{wrapped - bare:6.1f} ms over bare")
    print(f"  runner true (agent)     {call:7.1f} ms   +{call - bare:6.1f} ms over bare")
    print(f"  runner time_left        {channel:7.1f} ms   (the channel alone: no exec)")
    verdict = "met" if call - bare < 50 else "NOT met"
    print(f"runner adds {call - bare:.1f} ms over a bare docker exec (target < 50 ms: {verdict})")
    start, stop = startup_s(max(3, args.runs // 5))
    print(f"container start-up (to first answer) {start:.2f} s; removal {stop:.2f} s")
    local, docker = grading_s(args.repeat)
    ratio = docker / local
    verdict = "met" if ratio <= 1.5 else "NOT met"
    print(
        f"grading, starter tiny bundle on the 100-question demo exam: local {local:.2f} s, "
        f"docker {docker:.2f} s, x{ratio:.2f} (target <= 1.5x: {verdict})"
    )


if __name__ == "__main__":
    main()
