"""The submission history and audit log are append-only chains: edits and cuts are detected."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from toolkit.results.chain import ChainedLog, ChainError, read_chain
from toolkit.results.model import Candidate
from toolkit.run.history import SubmissionHistory


def _candidate(n: int) -> Candidate:
    return Candidate(
        id=f"c{n:03d}",
        submitted_at=datetime.now(UTC),
        elapsed_s=float(n),
        sha256=f"{n:064x}",
        packed_bytes=100 * n,
        public_score=10.0 * n,
    )


@pytest.fixture
def history(tmp_path: Path) -> SubmissionHistory:
    h = SubmissionHistory(tmp_path / "history.jsonl")
    for n in (1, 2, 3):
        h.add_candidate(_candidate(n), source=f"bundles/b{n}")
    h.promote("c002", datetime.now(UTC), 5.0)
    return h


def test_history_round_trips(history: SubmissionHistory) -> None:
    again = SubmissionHistory(history.path)
    assert [c.id for c in again.candidates()] == ["c001", "c002", "c003"]
    promoted = again.promoted()
    assert promoted is not None and promoted.id == "c002"
    assert again.next_id() == "c004"
    history.verify()


def test_last_promotion_wins_and_unknown_id_is_refused(history: SubmissionHistory) -> None:
    history.promote("c003", datetime.now(UTC), 6.0)
    assert history.promoted() is not None and history.promoted().id == "c003"  # type: ignore[union-attr]
    with pytest.raises(KeyError):
        history.promote("c999", datetime.now(UTC), 7.0)


def test_edited_entry_is_detected(history: SubmissionHistory) -> None:
    lines = history.path.read_text().splitlines(keepends=True)
    lines[1] = lines[1].replace('"public_score": 20.0', '"public_score": 99.0')
    history.path.write_text("".join(lines))
    with pytest.raises(ChainError, match=r"history.jsonl:3: previous-entry hash"):
        read_chain(history.path)
    with pytest.raises(ChainError):
        history.verify()


def test_truncated_mid_line_is_detected(history: SubmissionHistory) -> None:
    data = history.path.read_bytes()
    history.path.write_bytes(data[:-20])
    with pytest.raises(ChainError, match="truncated"):
        read_chain(history.path)


def test_dropped_last_entries_are_detected(history: SubmissionHistory) -> None:
    lines = history.path.read_bytes().splitlines(keepends=True)
    history.path.write_bytes(b"".join(lines[:-1]))  # a valid prefix of the chain
    read_chain(history.path)  # the chain alone cannot tell ...
    with pytest.raises(ChainError, match="holds 3 entries, the harness wrote 4"):
        history.verify()  # ... the head the harness kept can


def test_removed_middle_entry_is_detected(history: SubmissionHistory) -> None:
    lines = history.path.read_bytes().splitlines(keepends=True)
    history.path.write_bytes(b"".join([lines[0], *lines[2:]]))
    with pytest.raises(ChainError, match="sequence number"):
        read_chain(history.path)


def test_replaced_last_entry_is_detected(tmp_path: Path) -> None:
    log = ChainedLog(tmp_path / "audit.jsonl")
    log.append({"argv": ["true"]})
    first = log.path.read_bytes()
    log.append({"argv": ["false"]})
    forged = ChainedLog(tmp_path / "forged.jsonl")
    forged.path.write_bytes(first)
    forged = ChainedLog(forged.path)
    forged.append({"argv": ["echo", "forged"]})
    log.path.write_bytes(forged.path.read_bytes())  # same length, valid chain, other content
    with pytest.raises(ChainError, match="last entry was replaced"):
        log.verify()
