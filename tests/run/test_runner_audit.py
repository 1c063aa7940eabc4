"""The audit log loses nothing, and no client hangs (issue 8, finding 7).

Each test sends one kind of call the shell client would never send, or one the service cannot
serve, and checks three things: the call has exactly one audit entry that says what happened,
the client got an answer (or was let go) within the per-call limit plus the grace, and the
service went on serving the next call. Every wait has a timeout: a hang fails, it never blocks.
"""

from __future__ import annotations

import base64
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.run.runner_env import Env, make_env
from toolkit.clock import Clock
from toolkit.runner import channel
from toolkit.runner.audit import decode_arg
from toolkit.runner.channel import Call
from toolkit.runner.service import INTERNAL, KILLED, MALFORMED

PER_CALL_S = 3.0
GRACE_S = 2.0


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Env]:
    monkeypatch.setattr(channel, "OPEN_TIMEOUT_S", 1.0)  # a client has 1 s to open a FIFO

    def boom(call: Call) -> int:
        raise RuntimeError("a bug in a handler")

    def stuck(call: Call) -> int:
        call.say("stuck handler: started")
        time.sleep(3600)
        return 0

    clock = Clock(budget_s=600, reserved_s=60, per_call_limit_s=PER_CALL_S)
    yield from make_env(tmp_path, clock, handlers={"boom": boom, "stuck": stuck}, grace_s=GRACE_S)


def _still_serves(env: Env) -> None:
    done = env.call("sh", "-c", "echo alive")
    assert (done.returncode, done.stdout) == (0, "alive\n"), done.stderr


def test_an_argument_that_is_not_utf8_is_run_and_recorded_exactly(env: Env) -> None:
    odd = b"a\xffb\xc3("  # not UTF-8
    done = env.call_bytes("printf", "%s|%s", odd, "\u00e9t\u00e9", timeout=20)
    assert done.returncode == 0, done.stderr
    assert done.stdout == odd + "|\u00e9t\u00e9".encode()  # the command got the exact bytes
    issue = env.call_bytes("sh", "-c", "echo hi", b"\xff", timeout=20)  # the issue's own call
    assert (issue.returncode, issue.stdout) == (0, b"hi\n")
    first, second = env.wait_entries(2)
    assert first["argv"] == ["printf", "%s|%s", {"b64": base64.b64encode(odd).decode()}, "été"]
    assert [decode_arg(a) for a in first["argv"]] == [b"printf", b"%s|%s", odd, "été".encode()]
    assert second["argv"] == ["sh", "-c", "echo hi", {"b64": "/w=="}]
    assert env.service.infra_errors == []


def test_an_argument_list_over_the_limit_is_refused_with_a_reply(env: Env) -> None:
    chunk = "x" * 120_000  # one argument may hold at most 128 KiB; the list is ~1.2 MB
    started = time.monotonic()
    done = env.call("echo", *[chunk] * 10, timeout=20)
    assert time.monotonic() - started < 10
    assert done.returncode == MALFORMED
    assert done.stderr.startswith("[runner] time left: ")
    assert "over the limit" in done.stderr and done.stdout == ""
    (entry,) = env.wait_entries(1)
    assert entry["argv"] is None and entry["exit_code"] == MALFORMED
    assert entry["request_bytes"] == 10 * 120_001 + len("echo") + 1
    assert base64.b64decode(entry["request_head_b64"]).startswith(b"echo\0xxx")
    assert "over the limit" in entry["note"]
    _still_serves(env)


def test_an_argument_file_without_its_final_nul_is_refused_and_kept(env: Env) -> None:
    raw = env.raw("NoNul001").make(b"echo\0hello")
    raw.send()
    got = raw.replies()
    assert got["err"] is not None and got["out"] == b""
    assert b"refused: the argument list does not end with a NUL byte" in got["err"]
    assert raw.rc() == MALFORMED
    (entry,) = env.wait_entries(1)
    assert entry["call"] == "NoNul001" and entry["argv"] is None
    assert base64.b64decode(entry["request_b64"]) == b"echo\0hello"
    _still_serves(env)


@pytest.mark.parametrize(
    "junk",
    ["no-argv", "argv-is-dir", "argv-is-fifo", "argv-is-link", "err-is-file", "no-fifos"],
)
def test_a_call_folder_with_junk_is_audited_and_never_blocks_the_service(
    env: Env, junk: str
) -> None:
    raw = env.raw("Junk0001")
    if junk == "no-argv":
        raw.make(None)
    elif junk == "argv-is-dir":
        raw.make(None)
        (raw.folder / "argv").mkdir()
    elif junk == "argv-is-fifo":  # an open() that would block forever if it were not careful
        raw.make(None)
        os.mkfifo(raw.folder / "argv")
    elif junk == "argv-is-link":
        raw.make(None)
        (raw.folder / "argv").symlink_to("/etc/passwd")
    elif junk == "err-is-file":
        raw.make(b"echo\0hi\0", fifos=("out",))
        (raw.folder / "err").write_bytes(b"")
    else:
        raw.make(b"echo\0hi\0", fifos=())
    raw.send()
    if junk.startswith(("argv", "no-argv")):
        got = raw.replies()  # the client still hears why
        assert got["err"] is not None and b"refused" in got["err"]
        assert raw.rc() == MALFORMED
    (entry,) = env.wait_entries(1, timeout=PER_CALL_S + GRACE_S + 5)
    assert entry["call"] == "Junk0001" and entry["exit_code"] == MALFORMED
    assert entry["note"].startswith("bad request: ")
    if junk.startswith(("argv", "no-argv")):
        assert entry["argv"] is None
    if junk == "err-is-file":
        assert (raw.folder / "err").read_bytes() == b""  # nothing written into a plain file
    _still_serves(env)


def test_a_folder_swapped_for_a_link_is_never_followed(env: Env, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "argv").write_bytes(b"echo\0hi\0")
    os.mkfifo(target / "out")
    os.mkfifo(target / "err")
    (env.channel / "calls" / "Link0001").symlink_to(target)
    env.raw("Link0001").send()
    (entry,) = env.wait_entries(1)
    assert entry["exit_code"] == MALFORMED and "no call folder" in entry["note"]
    assert sorted(p.name for p in target.iterdir()) == ["argv", "err", "out"]  # no rc written
    _still_serves(env)


def test_a_client_that_opens_only_one_fifo_is_let_go(env: Env) -> None:
    raw = env.raw("OneFifo1").make(b"echo\0hi\0")
    raw.send()
    started = time.monotonic()
    got = raw.replies(streams=("err",))  # never opens `out`
    assert got["err"] is not None and got["err"].startswith(b"[runner] time left: ")
    assert time.monotonic() - started < PER_CALL_S + GRACE_S
    (entry,) = env.wait_entries(1)
    assert entry["note"].startswith("client gone: ") and "out" in entry["note"]
    assert entry["argv"] == ["echo", "hi"]
    _still_serves(env)


def test_a_client_that_stops_reading_is_closed_at_the_limit(env: Env) -> None:
    raw = env.raw("NoRead01").make(b"sh\0-c\0yes | head -c 50000000\0")
    raw.send()
    err = os.open(raw.folder / "err", os.O_RDONLY)  # reads the header, then nothing more
    try:
        assert os.read(err, 200).startswith(b"[runner] time left: ")
        out = os.open(raw.folder / "out", os.O_RDONLY)
        try:
            (entry,) = env.wait_entries(1, timeout=PER_CALL_S + GRACE_S + 5)
        finally:
            os.close(out)
    finally:
        os.close(err)
    assert entry["exit_code"] == KILLED
    assert entry["end_s"] - entry["start_s"] <= PER_CALL_S + GRACE_S + 1
    _still_serves(env)


def test_a_handler_that_raises_is_answered_audited_and_an_infra_error(env: Env) -> None:
    done = env.call("boom", "now", timeout=20)
    assert done.returncode == INTERNAL
    assert "internal error: a bug in a handler" in done.stderr
    (entry,) = env.wait_entries(1)
    assert entry["argv"] == ["boom", "now"] and entry["exit_code"] == INTERNAL
    assert "RuntimeError" in entry["note"]
    assert env.service.infra_errors and "a bug in a handler" in env.service.infra_errors[0]
    _still_serves(env)


def test_a_handler_that_never_returns_is_closed_after_the_limit_and_grace(env: Env) -> None:
    started = time.monotonic()
    done = env.call("stuck", timeout=PER_CALL_S + GRACE_S + 10)
    took = time.monotonic() - started
    assert PER_CALL_S <= took < PER_CALL_S + GRACE_S + 2
    assert done.returncode == KILLED
    assert "stuck handler: started" in done.stderr and "closed by the harness" in done.stderr
    (entry,) = env.wait_entries(1)
    assert entry["exit_code"] == KILLED and "closed by the harness" in entry["note"]
    _still_serves(env)
    assert len(env.wait_entries(2)) == 2  # the stuck thread never adds a second entry


def test_a_failing_audit_log_is_an_infrastructure_error_not_a_hang(env: Env) -> None:
    env.audit.unlink(missing_ok=True)
    env.audit.mkdir()  # appends now fail (EISDIR)
    done = env.call("sh", "-c", "echo still-answered", timeout=20)
    assert (done.returncode, done.stdout) == (0, "still-answered\n")
    assert env.service.infra_errors
    assert "audit log could not record call" in env.service.infra_errors[0]


def test_odd_bytes_in_submit_and_promote_are_the_agents_problem_not_ours(env: Env) -> None:
    odd = env.workspace / "bundles" / "odd"
    odd.mkdir()
    (odd / "inference.py").write_text("def load(bundle_dir, device):\n    raise ValueError\n")
    (odd / os.fsdecode(b"name-\xff")).write_text("a file name that is not UTF-8")
    calls = [
        ("submit", b"bundles/\xff"),
        ("submit", b"bundles/odd"),
        ("promote", b"c\xff"),
        ("history", b"\xff"),
    ]
    for argv in calls:
        done = env.call_bytes(*argv, timeout=30)
        assert done.returncode not in (INTERNAL, KILLED), done.stderr
    assert env.service.infra_errors == []
    assert len(env.wait_entries(len(calls))) == len(calls)


def test_junk_requests_and_missing_folders(env: Env) -> None:
    raw = env.raw("Missing1")
    raw.send(b"x" * 10_000)  # a line far too long: ignored
    raw.send(b"../../etc")  # not a call name: ignored
    raw.send()  # a call name with no folder: nobody to answer, but on record
    (entry,) = env.wait_entries(1)
    assert entry["call"] == "Missing1" and entry["argv"] is None
    assert "no call folder" in entry["note"]
    _still_serves(env)


def test_every_call_has_exactly_one_entry_when_the_run_stops(env: Env) -> None:
    procs = [
        subprocess.Popen(
            [str(env.client), "sh", "-c", f"echo {n}; sleep 30"],
            cwd=env.workspace,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        for n in range(4)
    ]
    stuck = subprocess.Popen(
        [str(env.client), "stuck"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline()
    assert stuck.stderr is not None
    while b"stuck handler" not in stuck.stderr.readline():
        pass
    late = [env.raw(f"Late{n:04d}").make(b"echo\0late\0") for n in range(5)]
    for raw in late:  # requested at the last moment: served, or found unread at the stop
        raw.send()
    env.service.stop("the test ended the run")
    for proc in [*procs, stuck]:
        assert proc.wait(timeout=10) == KILLED
    entries = env.entries()
    assert len(entries) == 10 and len({e["call"] for e in entries}) == 10
    running = [e for e in entries if not e["call"].startswith("Late")]
    assert all("the test ended the run" in e["note"] for e in running)
    assert {e["call"] for e in entries} >= {raw.name for raw in late}
