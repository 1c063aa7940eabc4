"""The audit log's bounds (`toolkit.runner.audit_gate`), on a real chained log.

Each bound is a count the agent controls (malformed requests, calls, a full volume): the log
lists up to the bound and counts the rest in summary entries, so what it says adds up.
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from tests.run.small_fs import fill, small_fs
from toolkit.results.chain import AppendError, ChainedLog, read_chain
from toolkit.runner.audit_gate import AuditGate


def _counts(path: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for e in read_chain(path):
        if "summary" in e:
            out[e["summary"]] = out.get(e["summary"], 0) + e["count"]
    return out


def test_calls_past_the_cap_are_counted_not_listed(tmp_path: Path) -> None:
    log = ChainedLog(tmp_path / "audit.jsonl")
    gate = AuditGate(log, max_entries=3, summary_every=4)
    for n in range(10):
        over = gate.full()
        gate.record({"call": f"c{n}"}, malformed=False, over_cap=over, at_s=float(n))
    gate.flush()
    calls = [e for e in read_chain(log.path) if "summary" not in e]
    assert [e["call"] for e in calls] == ["c0", "c1", "c2"]
    assert _counts(log.path) == {"over-cap": 7}
    assert gate.full()


def test_malformed_requests_past_the_first_are_counted(tmp_path: Path) -> None:
    log = ChainedLog(tmp_path / "audit.jsonl")
    gate = AuditGate(log, malformed_logged=2, summary_every=5)
    for n in range(12):
        gate.record({"call": f"m{n}"}, malformed=True, over_cap=False, at_s=float(n))
    gate.record({"call": "real"}, malformed=False, over_cap=False, at_s=12.0)
    gate.flush()
    entries = read_chain(log.path)
    assert [e["call"] for e in entries if "summary" not in e] == ["m0", "m1", "real"]
    summaries = [e for e in entries if "summary" in e]
    assert [(e["count"], e["first_s"], e["last_s"]) for e in summaries] == [
        (5, 2.0, 6.0),  # written when 5 had come
        (5, 7.0, 11.0),
    ]


def test_entries_a_full_volume_refused_are_counted_once_there_is_room(tmp_path: Path) -> None:
    with small_fs(tmp_path / "vol") as vol:
        log = ChainedLog(vol / "audit.jsonl")
        gate = AuditGate(log)
        gate.record({"call": "first"}, malformed=False, over_cap=False, at_s=0.0)
        fill(vol)
        with pytest.raises(AppendError) as raised:
            gate.record({"call": "x" * 20_000}, malformed=False, over_cap=False, at_s=1.0)
        assert raised.value.errno == errno.ENOSPC
        gate.lost(1.0)
        assert gate.calls_logged == 1  # the refused entry is not counted as listed
        (vol / "filler.bin").unlink()
        gate.flush()
        assert _counts(log.path) == {"lost": 1}
        assert [e.get("call") for e in read_chain(log.path)] == ["first", None]
