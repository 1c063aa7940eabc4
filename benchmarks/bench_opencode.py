"""The harness's overhead per agent step, with the real opencode and a scripted provider.

One agent step: the provider's reply carrying a tool call leaves it; the scaffold runs the tool;
the next request, carrying the result, reaches the provider. The overhead of a step is that
round trip minus the tool's own time (as the scaffold times it): parsing the stream, the
permission check, building the next request, and the path to the provider and back.

Four ways, in the same process:
  host        opencode started directly on the host, provider on its loopback (the reference:
              the scaffold's own overhead, no sandbox, no gate);
  sandbox     opencode alone in a sandbox like the controller's, through the egress gate;
  run: true   a whole run (controller sandbox, egress gate, provider relay, runner, clock)
              with `true` steps;
  run: runner the same run's `runner time_left` steps (tool time = the runner round trip).
Each line prints the medians in ms: round trip, tool time, overhead; and the overhead's ratio
to the host's.

    .venv/bin/python benchmarks/bench_opencode.py [--steps 12]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the scripted provider lives with the tests

from tests.agents.fake_provider import FakeProvider, Reply, Request, bash  # noqa: E402
from toolkit.agents.opencode import (  # noqa: E402
    SWITCHES,
    OpencodeAgent,
    _prevent_dependency_install,
    scaffold_config,
)
from toolkit.agents.providers import Provider  # noqa: E402
from toolkit.agents.scaffold import isolated_env, require  # noqa: E402
from toolkit.run.inputs import DEMO_BANK, built_exam, prepare_data, public_set  # noqa: E402
from toolkit.run.orchestrate import execute_run  # noqa: E402
from toolkit.run.spec import RunSpec  # noqa: E402
from toolkit.sandbox import Egress, create_sandbox  # noqa: E402
from toolkit.tracks.model import get_track  # noqa: E402


def _script(commands: list[str]):  # type: ignore[no-untyped-def]
    def model(request: Request) -> Reply:
        if request.turn < len(commands):
            return Reply(calls=[bash(commands[request.turn])])
        return Reply(text="done")

    return model


def _tool_times(events: list[dict[str, object]]) -> dict[str, tuple[str, float]]:
    """call id -> (command, seconds the scaffold says the tool ran)."""
    found: dict[str, tuple[str, float]] = {}
    for event in events:
        part = event.get("part")
        if event.get("type") != "tool_use" or not isinstance(part, dict):
            continue
        state = part.get("state", {})
        timing = state.get("time", {})
        command = str(state.get("input", {}).get("command", ""))
        found[str(part.get("callID"))] = (command, (timing["end"] - timing["start"]) / 1000)
    return found


def _steps(provider: FakeProvider, events: list[dict[str, object]], prefix: str):  # type: ignore[no-untyped-def]
    """(round trip, tool time, overhead) of each step whose command starts with `prefix`."""
    tools = _tool_times(events)
    rows = []
    for call_id, sent in provider.calls_sent.items():
        back = provider.results_back.get(call_id)
        if back is None or call_id not in tools or not tools[call_id][0].startswith(prefix):
            continue
        round_trip, tool = back - sent, tools[call_id][1]
        rows.append((round_trip, tool, round_trip - tool))
    return rows


def alone(binary: Path, steps: int, sandboxed: bool) -> list[tuple[float, float, float]]:
    """opencode by itself, on the host or in an egress sandbox like the controller's."""
    # The same script as the run (`runner` is not found here: only `true` steps are counted).
    commands = ["true", "runner time_left"] * steps
    with tempfile.TemporaryDirectory() as tmp, FakeProvider(_script(commands)) as fake:
        root = Path(tmp)
        env = isolated_env(root / "agent")
        config_dir = Path(env["XDG_CONFIG_HOME"]) / "opencode"
        _prevent_dependency_install(config_dir)
        entry = Provider("fake", "openai-compatible", fake.base_url, "UNUSED")
        (config_dir / "opencode.json").write_text(json.dumps(scaffold_config(entry, "m", {})))
        env.update(SWITCHES)
        env["SHELL"] = "/bin/bash"
        argv = ["run", "--format", "json", "--title", "t", "--model", "fake/m", "go"]
        if not sandboxed:
            done = subprocess.run(
                [str(binary), *argv], capture_output=True, env=env, cwd=tmp, timeout=600
            )
            out = done.stdout
        else:
            bin_dir = root / "bin"
            bin_dir.mkdir()
            shutil.copyfile(binary, bin_dir / "opencode")
            (bin_dir / "opencode").chmod(0o755)
            for tool in ("sh", "bash", "true", "rg"):
                (bin_dir / tool).symlink_to(shutil.which(tool) or "/bin/false")
            env["PATH"] = str(bin_dir)
            rules = [Egress("127.0.0.1", fake.port)]
            with create_sandbox("local", root=root, env=env, egress=rules) as box:
                out = box.exec(["opencode", *argv], timeout=600).stdout
        lines = out.decode().splitlines()
        events = [json.loads(line) for line in lines if line.startswith("{")]
        return _steps(fake, events, "true")


def in_a_run(steps: int) -> tuple[list[tuple[float, float, float]], ...]:
    commands = ["true", "runner time_left"] * steps  # interleaved: same context sizes
    with tempfile.TemporaryDirectory() as tmp, FakeProvider(_script(commands)) as fake:
        base = Path(tmp)
        os.environ["ARI_HOME"] = str(base / "home")
        os.environ["BENCH_PROVIDER_KEY"] = "sk-bench-0123456789"
        providers = base / "providers.toml"
        providers.write_text(
            f'[fake]\nkind = "openai-compatible"\nbase_url = "{fake.base_url}"\n'
            'key_env = "BENCH_PROVIDER_KEY"\n'
        )
        agent = OpencodeAgent.for_run(provider="fake", model="m", providers_path=providers)
        text = base / "text.txt"
        text.write_text("the quick brown fox jumps over the lazy dog\n" * 3000)
        spec = RunSpec(
            track=get_track(REPO / "results", "demo-cpu-3"),
            model="m",
            seed=0,
            agent=agent,
            exam=built_exam(DEMO_BANK, "demo"),
            public_set=public_set(),
            data_dir=prepare_data(text, base / "data"),
            results_dir=base / "results",
            budget_s=600,
            per_call_limit_s=120,
            reserved_s=10,
        )
        result = execute_run(spec)
        events_file = base / "results" / "demo-cpu-3" / result.artifacts["events"]
        events = [json.loads(line) for line in events_file.read_text().splitlines()]
        return _steps(fake, events, "true"), _steps(fake, events, "runner")


def _line(name: str, rows: list[tuple[float, float, float]], reference: float | None) -> float:
    medians = [statistics.median(column) * 1000 for column in zip(*rows, strict=True)]
    ratio = f"  x{medians[2] / reference:.2f} of host" if reference else ""
    print(
        f"{name:12s}: round trip {medians[0]:7.1f} ms  tool {medians[1]:7.1f} ms  "
        f"overhead {medians[2]:7.1f} ms  ({len(rows)} steps){ratio}"
    )
    return medians[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=12)
    args = parser.parse_args()
    binary, version = require()
    if shutil.which("rg") is None:
        sys.exit("ripgrep (rg) is needed: apt-get install ripgrep")
    print(f"opencode {version}, {args.steps} steps each (medians)")
    host = _line("host", alone(binary, args.steps, sandboxed=False), None)
    _line("sandbox", alone(binary, args.steps, sandboxed=True), host)
    plain, runner = in_a_run(args.steps)
    _line("run: true", plain, host)
    _line("run: runner", runner, host)


if __name__ == "__main__":
    main()
