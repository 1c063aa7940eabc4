"""The audit log keeps every call's arguments, but no more than a budget per run.

An agent calling `runner true <900 KB>` thousands of times would otherwise write gigabytes into
the results. Past the budget (made small here), a call with long arguments is refused with a
reply that says why, and its entry keeps a short head and the size: on record, never silently
dropped. Short calls (submit, promote) still work.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.run.runner_env import Env, make_env
from toolkit.clock import Clock
from toolkit.runner import audit
from toolkit.runner.audit import BUDGET_HEAD_BYTES, decode_arg, stored_size
from toolkit.runner.service import MALFORMED

BUDGET = 1_000_000
CHUNK = "x" * 100_000  # one argument may hold at most 128 KiB


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Env]:
    monkeypatch.setattr(audit, "ARGS_BUDGET_BYTES", BUDGET)
    clock = Clock(budget_s=600, reserved_s=60, per_call_limit_s=10)
    yield from make_env(tmp_path, clock)


def _whole(argv: list[str]) -> bytes:
    return b"".join(a.encode() + b"\0" for a in argv)


def test_past_the_budget_long_arguments_are_refused_and_audited_in_short(env: Env) -> None:
    big = ["true", *[CHUNK] * 4]
    for _ in range(2):  # 800 KB of the 1 MB budget: run and recorded exactly
        done = env.call(*big, timeout=20)
        assert done.returncode == 0, done.stderr
    # 40 KB of control bytes take 240 KB as JSON text: the budget counts what is stored.
    done = env.call_bytes("true", b"\x01" * 40_000, timeout=20)
    assert done.returncode == MALFORMED and done.stdout == b""
    assert b"would pass its budget of 1,000,000; pass long input in a file" in done.stderr
    assert env.call("true", CHUNK, timeout=20).returncode == 0  # 100 KB still fits
    assert env.call("true", CHUNK, timeout=20).returncode == MALFORMED  # this one does not
    used = 2 * stored_size([a.encode() for a in big]) + stored_size([b"true", CHUNK.encode()])
    fill = "z" * (BUDGET - used - 100 - stored_size([b"true", b""]))
    assert env.call("true", fill, timeout=20).returncode == 0  # 100 bytes left
    over = "y" * (BUDGET_HEAD_BYTES + 1)
    assert env.call("true", over, timeout=20).returncode == MALFORMED
    short = env.call("sh", "-c", "echo still here", "q" * 200, timeout=20)  # as long as a head
    assert (short.returncode, short.stdout) == (0, "still here\n"), short.stderr

    entries = env.wait_entries(8)
    assert [e["exit_code"] for e in entries] == [0, 0, MALFORMED, 0, MALFORMED, 0, MALFORMED, 0]
    for kept in entries[:2]:
        assert [decode_arg(a) for a in kept["argv"]] == [a.encode() for a in big]
    refused = [
        (entries[2], b"true\0" + b"\x01" * 40_000 + b"\0"),
        (entries[4], _whole(["true", CHUNK])),
        (entries[6], _whole(["true", over])),
    ]
    for entry, whole in refused:
        assert entry["argv"] is None and "request_b64" not in entry
        assert entry["request_bytes"] == len(whole)
        assert base64.b64decode(entry["request_head_b64"]) == whole[:BUDGET_HEAD_BYTES]
        assert "budget of 1,000,000" in entry["note"]
    assert entries[5]["argv"] == ["true", fill]
    assert entries[7]["argv"] == ["sh", "-c", "echo still here", "q" * 200]
    log = env.service.audit.path.stat().st_size
    assert log < BUDGET + 20_000, log
    assert env.service.infra_errors == []
