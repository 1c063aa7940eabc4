"""Red-team: the agent's console is unbounded input to the harness.

The controller's stdout and stderr are copied into the run folder (`Transcript`) line by line,
and read back whole when the result is published. The agent decides what it prints: one line
of hundreds of megabytes is held in the harness's memory (several copies of it), and a console
of any size lands on the results disk and is then read into memory at once. An agent with an
hour can make the harness run out of memory or disk: the run dies `invalid`, a free rerun (and
other runs on the box suffer). These tests print 300 MB in a few seconds; a real agent can
print far more. (Fixed: `toolkit.run.transcript` reads in bounded pieces and caps each
console file.)
"""

from __future__ import annotations

from pathlib import Path

from tests.run.conftest import ShellAgent, SpecFactory
from toolkit.run.orchestrate import execute_run

PRINTED = 300_000_000


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/self/status")


def test_a_console_line_without_end_does_not_grow_the_harness(make_spec: SpecFactory) -> None:
    script = f"head -c {PRINTED} /dev/zero\necho\necho printed\n"
    spec = make_spec(ShellAgent(script), budget=60, per_call=20, reserved=5)
    Path("/proc/self/clear_refs").write_text("5")  # the peak (VmHWM) starts again from now
    before = _status_kib("VmRSS")
    result = execute_run(spec)
    grown = (_status_kib("VmHWM") - before) * 1024
    assert result.status == "failed", result.status_reason  # it promoted nothing
    assert grown < 100 * 2**20, f"the harness grew by {grown / 2**20:.0f} MiB for one line"


def test_a_flood_of_console_lines_is_capped_on_disk(make_spec: SpecFactory) -> None:
    # 2**18 lines of 1 KiB, made in the controller's /tmp (doubling a file), printed 1.1 times.
    script = (
        "l=x; for i in 1 2 3 4 5 6 7 8 9 10; do l=$l$l; done; printf '%s\\n' \"$l\" > /tmp/f\n"
        "for i in $(seq 18); do cat /tmp/f /tmp/f > /tmp/g && mv /tmp/g /tmp/f; done\n"
        "cat /tmp/f; head -c 20000000 /tmp/f\necho printed\n"
    )
    spec = make_spec(ShellAgent(script), budget=60, per_call=20, reserved=5)
    result = execute_run(spec)
    assert result.status == "failed", result.status_reason
    run_dir = spec.results_dir / spec.track.id / result.run_id
    stored = sum(p.stat().st_size for p in run_dir.rglob("*") if p.is_file())
    assert stored < 100 * 2**20, f"{stored / 2**20:.0f} MiB of console kept in the results"
