"""The public exams are pinned: the demo track's registry holds their hashes, so any change to
the engine's output (a family, the masking, the serialisation) shows up here first.

If this fails on purpose (the engine changed), bump `exam_builder.BUILDER_VERSION`, rebuild,
and register the new hashes as a new track or protocol fix: never re-pin silently.
"""

from __future__ import annotations

from pathlib import Path

from exam_helpers import DEMO, REPO, VALIDATION

from exam_builder.bank import load_bank
from exam_builder.exam_file import serialize, sha256_bytes
from exam_builder.generate import generate_questions
from toolkit.tracks.model import load_tracks


def _hash(bank_dir: Path) -> str:
    return sha256_bytes(serialize(generate_questions(load_bank(bank_dir))))


def test_demo_and_validation_hashes_match_the_demo_track() -> None:
    demo_tracks = [t for t in load_tracks(REPO / "results").values() if t.demo]
    assert demo_tracks, "no demo track in results/tracks.json"
    for track in demo_tracks:
        assert track.matches_exam(_hash(DEMO)), track.id
        assert track.public_set_sha256 is not None
        assert _hash(VALIDATION).startswith(track.public_set_sha256), track.id


def test_the_demo_track_publishes_the_demo_exam_chance_floor() -> None:
    """The chance floor is published with the track: it must be the one the gate measures."""
    from exam_builder.build import prepare_exam

    floor = prepare_exam(DEMO, english_text=None).manifest.quality.chance_floor
    for track in (t for t in load_tracks(REPO / "results").values() if t.demo):
        assert track.chance_floor == floor, (track.id, floor)
