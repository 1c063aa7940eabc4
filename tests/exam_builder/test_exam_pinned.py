"""The public exams are pinned: the demo track's registry holds their hashes, so any change to
the engine's output (a family, the masking, the serialisation) shows up here first.

If this fails on purpose (the engine changed), bump `exam_builder.BUILDER_VERSION`, rebuild,
and register the new hashes as a new track (`toolkit tracks new`; DEMO_TRACK, `make demo` and
the `toolkit run` default follow it): never re-pin a track silently. Older demo tracks keep
their own exams' hashes for the runs graded on them.
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


DEMO_TRACK = "demo-cpu-3"
"""The demo track of this engine: `make demo` runs it, `toolkit run` defaults to it."""


def test_demo_and_validation_hashes_match_the_demo_track() -> None:
    tracks = load_tracks(REPO / "results")
    track = tracks[DEMO_TRACK]
    assert track.demo
    assert track.matches_exam(_hash(DEMO)), track.id
    assert track.public_set_sha256 is not None
    assert _hash(VALIDATION).startswith(track.public_set_sha256), track.id
    # An older demo track pins an older exam: never this one (a track is frozen).
    for old in (t for t in tracks.values() if t.demo and t.id != DEMO_TRACK):
        assert not old.matches_exam(_hash(DEMO)), old.id


def test_the_demo_track_publishes_the_demo_exam_chance_floor() -> None:
    """The chance floor is published with the track: it must be the one the gate measures."""
    from exam_builder.build import prepare_exam

    floor = prepare_exam(DEMO, english_text=None).manifest.quality.chance_floor
    assert load_tracks(REPO / "results")[DEMO_TRACK].chance_floor == floor, floor
