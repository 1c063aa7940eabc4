"""Attack: a full disk must not cut a chained log (issue 27, item 2).

On a volume that fills, the next line of the audit log used to be written in part (a short
write was ignored): the log then read as altered and the run was voided. An append is now all
or nothing: the part that went in is cut back off and the error raised, the chain intact.
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from tests.run.small_fs import fill, small_fs
from toolkit.results.chain import AppendError, ChainedLog, read_chain
from toolkit.run.storage import Volume, reserve_path


def test_a_short_write_on_a_full_disk_leaves_no_cut_line(tmp_path: Path) -> None:
    with small_fs(tmp_path / "vol") as vol:
        log = ChainedLog(vol / "audit.jsonl")
        log.append({"call": "first"})
        log.append({"call": "second"})
        before = log.path.read_bytes()
        fill(vol)  # what is left: the rest of the log's last page, under 4 KiB
        with pytest.raises(AppendError) as raised:
            log.append({"call": "third", "junk": "x" * 20_000})  # fits in part only
        assert raised.value.errno == errno.ENOSPC
        assert log.path.read_bytes() == before  # cut back off: nothing half-written
        assert [e["call"] for e in read_chain(log.path)] == ["first", "second"]
        assert log.count == 2
        log.verify()  # what the harness checks before grading: intact
        (vol / "filler.bin").unlink()  # room again: the log goes on where it was
        log.append({"call": "fourth"})
        assert [e["call"] for e in log.verify()] == ["first", "second", "fourth"]


def test_the_reserve_holds_room_that_the_run_cannot_take(tmp_path: Path) -> None:
    """Taken before the run, the reserve is real blocks: filling the volume leaves it, and
    releasing it gives the harness room for its last writes."""
    with small_fs(tmp_path / "vol") as vol:
        volume = Volume(vol / "track" / "run", reserve_bytes=2 * 2**20)
        volume.take_reserve()
        assert reserve_path(volume.folder).stat().st_blocks * 512 >= 2 * 2**20
        volume.folder.mkdir()
        fill(volume.folder, "hog.bin")  # the run takes everything it can
        log = ChainedLog(volume.folder / "audit.jsonl")
        with pytest.raises(AppendError):
            log.append({"call": "x" * 8192})
        volume.note_full("an audit entry")
        volume.release_reserve()
        log.append({"call": "x" * 8192})  # the harness's own write now fits
        blame = volume.blame()
        assert blame is not None and blame[0] == "run"
