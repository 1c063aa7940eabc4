"""Bringing a run home as bytes: a packed run is written once, and a hostile one not at all."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from tests.stats.results_factory import run_dict
from toolkit.campaign.collect import CollectError, pack_run, unpack_run

TRACK = "v1-test"


def _made_run(results: Path, run_id: str = "r1") -> None:
    folder = results / TRACK
    (folder / run_id / "candidates").mkdir(parents=True)
    (folder / run_id / "audit.jsonl").write_text("{}\n")
    (folder / run_id / "candidates" / "c001.tar.gz").write_bytes(b"\x1f\x8b" + b"x" * 100)
    run = run_dict(run_id, track=TRACK, artifacts={"audit": f"{run_id}/audit.jsonl"})
    (folder / f"{run_id}.json").write_text(json.dumps(run))


def _tar(entries: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for info, data in entries:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def test_a_packed_run_lands_once_with_its_artifacts(tmp_path: Path) -> None:
    _made_run(tmp_path / "node")
    blob = pack_run(tmp_path / "node", TRACK, "r1")
    home = tmp_path / "results"
    path, result, new = unpack_run(blob, home)
    assert new and path == home / TRACK / "r1.json" and result.run_id == "r1"
    assert (home / TRACK / "r1" / "audit.jsonl").read_text() == "{}\n"
    assert (home / TRACK / "r1" / "candidates" / "c001.tar.gz").stat().st_size == 102
    _, _, again = unpack_run(blob, home)  # a retried collection writes nothing twice
    assert not again
    assert sorted(p.name for p in (home / TRACK).iterdir()) == ["r1", "r1.json"]


def _result_entry(run_id: str = "r1") -> tuple[tarfile.TarInfo, bytes]:
    return tarfile.TarInfo(f"{run_id}.json"), json.dumps(run_dict(run_id, track=TRACK)).encode()


def _link(name: str, target: str, kind: bytes) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info


HOSTILE = {
    "escape with ..": [(tarfile.TarInfo("r1/../../evil"), b"x")],
    "absolute path": [(tarfile.TarInfo("/tmp/evil"), b"x")],
    "another run's folder": [(tarfile.TarInfo("r2/evil"), b"x")],
    "symlink": [(_link("r1/link", "/etc/passwd", tarfile.SYMTYPE), None)],
    "hard link": [(_link("r1/hard", "/etc/passwd", tarfile.LNKTYPE), None)],
}


@pytest.mark.parametrize("attack", sorted(HOSTILE))
def test_a_hostile_packed_run_is_refused_whole(tmp_path: Path, attack: str) -> None:
    blob = _tar([_result_entry(), *HOSTILE[attack]])
    home = tmp_path / "results"
    with pytest.raises(CollectError):
        unpack_run(blob, home)
    assert not (home / TRACK / "r1.json").exists()
    assert not (tmp_path / "evil").exists()


def test_a_packed_run_needs_exactly_one_matching_result(tmp_path: Path) -> None:
    with pytest.raises(CollectError, match="exactly one"):
        unpack_run(_tar([_result_entry("r1"), _result_entry("r2")]), tmp_path)
    info, data = _result_entry("r1")
    info.name = "r9.json"
    with pytest.raises(CollectError, match="run_id"):
        unpack_run(_tar([(info, data)]), tmp_path)
    with pytest.raises(CollectError, match="not a tar"):
        unpack_run(b"not a tar at all" * 100, tmp_path)
