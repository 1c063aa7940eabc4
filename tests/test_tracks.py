"""The track and protocol-fix registry."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolkit.tracks.model import RegistryError, get_track, load_fixes, load_tracks


def track(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "t1",
        "title": "Test track",
        "benchmark_version": "1.0",
        "exam_sha256": "3f571c9c",
        "exam_questions": 100,
        "budget_s": 3600,
        "per_call_limit_s": 1200,
        "reserved_s": 300,
        "size_limit_bytes": 16_000_000,
        "hardware": "1x test GPU",
    }
    base.update(over)
    return base


def write(tmp_path: Path, tracks: list[Any], fixes: list[Any] | None = None) -> Path:
    (tmp_path / "tracks.json").write_text(json.dumps(tracks))
    if fixes is not None:
        (tmp_path / "protocol_fixes.json").write_text(json.dumps(fixes))
    return tmp_path


def test_load_and_match_short_hash(tmp_path: Path) -> None:
    tracks = load_tracks(write(tmp_path, [track()]))
    t = tracks["t1"]
    assert t.grading.context_bytes == 1024
    assert t.matches_exam("3f571c9c" + "0" * 56)
    assert not t.matches_exam("0" * 64)


def test_missing_registry_is_empty(tmp_path: Path) -> None:
    assert load_tracks(tmp_path) == {}
    assert load_fixes(tmp_path, {}) == []


def test_errors_name_file_and_field(tmp_path: Path) -> None:
    with pytest.raises(RegistryError, match=r"tracks.json: field '0.budget_s'"):
        load_tracks(write(tmp_path, [track(budget_s=-1)]))
    with pytest.raises(RegistryError, match=r"field '1.id': duplicate"):
        load_tracks(write(tmp_path, [track(), track()]))
    with pytest.raises(
        RegistryError, match=r"unknown track 'nope' in .*tracks.json \(known there: t1\)"
    ):
        get_track(write(tmp_path, [track()]), "nope")


def test_fix_must_name_a_known_track_and_revision(tmp_path: Path) -> None:
    fix = {
        "id": "f1",
        "track": "t1",
        "date": "2026-11-01",
        "title": "x",
        "description": "y",
        "revision": 2,
        "action": "legacy",
    }
    tracks = load_tracks(write(tmp_path, [track(protocol_revision=2)], [fix]))
    assert load_fixes(tmp_path, tracks)[0].revision == 2
    tracks = load_tracks(write(tmp_path, [track()], [fix]))
    with pytest.raises(RegistryError, match=r"field '0.revision'"):
        load_fixes(tmp_path, tracks)
    with pytest.raises(RegistryError, match=r"field '0.track': unknown track"):
        load_fixes(tmp_path, {})


def test_repo_registry_is_valid(repo_root: Path) -> None:
    """The committed registry (if present) validates."""
    tracks = load_tracks(repo_root / "results")
    load_fixes(repo_root / "results", tracks)
