"""The runner service through the real shell client and the real runner sandbox.

Each test attacks one rule: the header comes first, output streams as it comes, the per-call
limit kills, the reserved window refuses compute but not submit/promote, every call is audited.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.run.conftest import MAKE_BUNDLE
from tests.run.runner_env import Env, make_env
from tests.run.test_runner_interrupts import DEFAULT_SIGINT
from toolkit.clock import Clock
from toolkit.results.chain import read_chain
from toolkit.runner.service import KILLED, REFUSED


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    yield from make_env(tmp_path, Clock(budget_s=600, reserved_s=60, per_call_limit_s=2))


@pytest.fixture
def long_env(tmp_path: Path) -> Iterator[Env]:
    """A per-call limit no test reaches: a call ends by what the test does, or not at all."""
    yield from make_env(tmp_path, Clock(budget_s=600, reserved_s=60, per_call_limit_s=300))


@pytest.fixture
def reserved_env(tmp_path: Path) -> Iterator[Env]:
    # 600 s of which the last 590 are reserved, started 20 s ago: in the reserved window.
    clock = Clock(budget_s=600, reserved_s=590, per_call_limit_s=60)
    clock.started_mono -= 20
    yield from make_env(tmp_path, clock)


def test_every_reply_starts_with_the_time_left(env: Env) -> None:
    done = env.call("sh", "-c", "echo out; echo err >&2; exit 3")
    assert done.returncode == 3
    assert done.stdout == "out\n"
    assert done.stderr.startswith("[runner] time left: ")
    assert done.stderr.splitlines()[1:] == ["err"]
    left = env.call("time_left")
    assert left.returncode == 0 and 590 <= int(left.stdout) <= 600
    assert left.stderr.startswith("[runner] time left: ")


def test_compute_runs_at_workspace_root_without_network(env: Env) -> None:
    done = env.call("sh", "-c", "pwd; ls; (exec 3<>/dev/tcp/1.1.1.1/53) 2>/dev/null && echo NET")
    assert done.stdout.splitlines()[0] == str(env.workspace)
    assert "bundles" in done.stdout and ".runner" not in done.stdout.split()
    assert "NET" not in done.stdout
    hidden = env.call("ls", ".runner")
    assert hidden.stdout.strip() == ""  # the channel is hidden from the runner


def test_output_streams_as_it_comes(long_env: Env) -> None:
    proc = subprocess.Popen(
        [str(long_env.client), "sh", "-c", "echo first; sleep 3; echo second"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "first\n"
    first = time.monotonic()
    assert proc.stdout.readline() == "second\n"
    # The first line came while the command slept: held until its end, both would come at once.
    # (Timed between the lines, so a slow start of the client or the sandbox cannot matter.)
    assert time.monotonic() - first > 1.0
    assert proc.wait(timeout=30) == 0


def test_call_past_the_per_call_limit_is_killed_and_says_so(env: Env) -> None:
    started = time.monotonic()
    done = env.call("sh", "-c", "trap '' TERM; echo started; sleep 60", timeout=30)
    took = time.monotonic() - started
    assert done.returncode == KILLED
    assert "per-call limit" in done.stderr
    assert done.stdout == "started\n"
    assert took < 10
    entry = read_chain(env.audit)[-1]
    assert entry["exit_code"] == KILLED and "per-call limit" in entry["note"]


def test_reserved_window_refuses_compute_but_submit_and_promote_work(reserved_env: Env) -> None:
    env = reserved_env
    refused = env.call("sh", "-c", "echo should-not-run")
    assert refused.returncode == REFUSED
    assert "reserved window" in refused.stderr and "should-not-run" not in refused.stdout
    subprocess.run(["sh", "-c", MAKE_BUNDLE], cwd=env.workspace, check=True)
    submitted = env.call("submit", "bundles/triv", timeout=180)
    assert submitted.returncode == 0, submitted.stderr
    assert submitted.stdout.startswith("candidate c001: ")
    assert "public score 0.0% (0/20)" in submitted.stdout
    promoted = env.call("promote", "c001")
    assert promoted.returncode == 0 and promoted.stdout.startswith("promoted c001")
    assert "c001" in env.call("history").stdout
    bad = env.call("promote", "c009")
    assert bad.returncode != 0 and "no candidate 'c009'" in bad.stderr


def test_submit_refuses_what_is_not_a_bundle_folder(env: Env) -> None:
    outside = env.call("submit", "../../")
    assert outside.returncode != 0 and "not a folder inside the workspace" in outside.stderr
    (env.workspace / "bundles" / "link").mkdir()
    (env.workspace / "bundles" / "link" / "x").symlink_to("/etc/passwd")
    linked = env.call("submit", "bundles/link")
    assert linked.returncode != 0 and "symbolic links are not allowed" in linked.stderr


def test_every_call_is_audited(env: Env) -> None:
    env.call("sh", "-c", "printf abc")
    env.call("time_left")
    entries = read_chain(env.audit)
    assert [e["argv"][0] for e in entries] == ["sh", "time_left"]
    first = entries[0]
    assert first["stdout_bytes"] == 3 and first["exit_code"] == 0
    assert first["stdout_sha256"] == (
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"  # sha256("abc")
    )
    assert first["start_s"] <= first["end_s"]


def test_concurrent_calls_each_get_their_own_reply(env: Env) -> None:
    procs = [
        subprocess.Popen(
            [str(env.client), "sh", "-c", f"sleep 0.{n}; echo reply-{n}; exit {n}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        for n in range(8)
    ]
    for n, proc in enumerate(procs):
        out, _ = proc.communicate(timeout=60)
        assert (out, proc.returncode) == (f"reply-{n}\n", n)
    assert len(read_chain(env.audit)) == 8


def test_interrupted_client_cancels_its_call(long_env: Env) -> None:
    # The client starts with SIGINT at its default, as from a terminal, whatever the test
    # runner inherited (a shell cannot trap a signal that was ignored when it started).
    env = long_env
    proc = subprocess.Popen(
        [sys.executable, "-c", DEFAULT_SIGINT, str(env.client), "sh", "-c", "echo go; sleep 60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "go\n"
    proc.send_signal(2)  # SIGINT, as Ctrl-C or a tool timeout would
    proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not read_chain(env.audit):
        time.sleep(0.1)
    entry = read_chain(env.audit)[-1]
    assert entry["note"] and "cancelled" in entry["note"]
    assert entry["end_s"] - entry["start_s"] < 20


def test_submit_gives_up_as_soon_as_the_archive_is_over_the_limit(env: Env) -> None:
    huge = env.workspace / "bundles" / "huge"
    huge.mkdir()
    (huge / "inference.py").write_text("def load(bundle_dir, device):\n    return None\n")
    for n in range(40):  # 40 MB that do not compress: packing stops well before the end
        (huge / f"shard-{n:02d}.bin").write_bytes(os.urandom(1 << 20))
    done = env.call("submit", "bundles/huge", timeout=120)
    assert done.returncode == 1, done.stderr
    assert "submit refused" in done.stderr and "packing stopped" in done.stderr
    assert not list((env.workspace.parent / "candidates").glob("*.tar.gz"))
