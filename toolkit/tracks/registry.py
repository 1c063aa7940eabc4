"""A results folder carries the registry entries its runs need: self-contained.

`toolkit run --results /tmp/ari-results` used to leave a folder that `toolkit leaderboard` and
`mkdocs build` could not read ("unknown track"): the track lived only in the registry the run
was started from. Now every run (and campaign) copies its track's entry and that track's
protocol fixes into the results folder's own `tracks.json` and `protocol_fixes.json` before it
starts. An entry already there must be the same: a folder whose `tracks.json` says something
else about the track is refused (its runs would be judged by other rules). A protocol fix whose
rules are the same but whose words changed (a description corrected) takes the registry's
words.
"""

from __future__ import annotations

import json
from pathlib import Path

from toolkit.results.model import write_json_atomic
from toolkit.tracks.model import (
    FIXES_FILE,
    TRACKS_FILE,
    ProtocolFix,
    RegistryError,
    Track,
    load_fixes,
    load_tracks,
)


def carry_track(results_dir: Path, registry_dir: Path, track: Track) -> bool:
    """Make `results_dir` hold `track` and its protocol fixes as `registry_dir` has them;
    True when a file was written. RegistryError when the folder disagrees about the track."""
    if results_dir.resolve() == registry_dir.resolve():
        return False
    results_dir.mkdir(parents=True, exist_ok=True)
    wrote = False
    tracks = load_tracks(results_dir)
    mine = tracks.get(track.id)
    if mine is not None and mine != track and _track_rules(mine) != _track_rules(track):
        raise RegistryError(
            f"{results_dir / TRACKS_FILE}: track '{track.id}' differs from the one in "
            f"{registry_dir / TRACKS_FILE}; a results folder holds one version of a track"
        )
    if mine != track:  # new, or the same rules in new words (a title told apart): take it
        tracks[track.id] = track
        _write(results_dir / TRACKS_FILE, [t.model_dump(mode="json") for t in tracks.values()])
        wrote = True
    source = [f for f in load_fixes(registry_dir, load_tracks(registry_dir)) if f.track == track.id]
    here = load_fixes(results_dir, tracks)
    known = {f.id: f for f in here}
    reworded = False
    for fix in source:
        if fix.id in known and known[fix.id] != fix:
            if _rules(known[fix.id]) != _rules(fix):
                raise RegistryError(
                    f"{results_dir / FIXES_FILE}: protocol fix '{fix.id}' differs from the one "
                    f"in {registry_dir / FIXES_FILE}"
                )
            # Same fix, new wording (a page that said something no longer true): take it.
            here = [fix if f.id == fix.id else f for f in here]
            reworded = True
    new = [f for f in source if f.id not in known]
    if new or reworded:
        _write(results_dir / FIXES_FILE, [f.model_dump(mode="json") for f in [*here, *new]])
        wrote = True
    return wrote


def _track_rules(track: Track) -> Track:
    """A track without its words (title, description): what it freezes."""
    return track.model_copy(update={"title": "", "description": ""})


def _rules(fix: ProtocolFix) -> ProtocolFix:
    """A fix without its words (title, description): what it changes, where and when."""
    return fix.model_copy(update={"title": "", "description": ""})


def _write(path: Path, data: object) -> None:
    write_json_atomic(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
