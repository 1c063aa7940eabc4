"""A visitor's site (issue 51 items 3 and 4): the run page names the trusted list that holds
a run's signing key, never the folder's own hint (one mkdocs build for the module); the demo
tracks are told apart and name the track `make demo` runs; no issue numbers outside the
maintainers' pages; a results folder takes a track's new words."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from site_fixture import build, run_dict, track_dict, write_registry, write_run

from toolkit.cli import cli
from toolkit.results import signing
from toolkit.tracks.model import TRACKS_FILE, RegistryError, get_track, load_tracks
from toolkit.tracks.registry import carry_track

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("visitor")
    results = root / "results"
    write_registry(results, [track_dict()])
    write_run(results, run_dict("signed", model="model-a", passed=40))
    done = build(results, root / "public")
    assert done.returncode == 0, done.stdout + done.stderr
    return root / "public"


def test_the_run_page_names_the_trusted_list_that_holds_the_key(site: Path) -> None:
    row = (site / "rows" / "v1-test" / "model-a.html").read_text(encoding="utf-8")
    assert "holds: key <code>ed25519:" in row
    assert "pinned in the pinned key list pinned_keys.json" in row, row
    assert "this results folder's signing_keys.json" not in row


def test_which_list_holds_a_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARI_HOME", str(tmp_path / "home"))
    monkeypatch.delenv(signing.TRUSTED_KEYS_ENV, raising=False)
    mine = signing.local_public()
    assert signing.trusted_list_of(mine.id).startswith("this machine's own key")
    pins = tmp_path / "ours.json"
    signing.trust_file(pins, mine)
    monkeypatch.setenv(signing.TRUSTED_KEYS_ENV, str(pins))
    assert signing.trusted_list_of(mine.id).startswith("the pinned key list ours.json")
    assert signing.trusted_list_of("ed25519:0000000000000000") == "no pinned list (not trusted)"


ISSUE = re.compile(r"\bissues? #?\d+", re.IGNORECASE)


def test_demo_tracks_are_told_apart_and_name_the_make_demo_track() -> None:
    tracks = load_tracks(REPO / "results")
    demos = [t for t in tracks.values() if t.demo]
    assert len({t.title for t in demos}) == len(demos) == 3
    assert len({t.description for t in demos}) == 3
    for t in demos:  # each says make demo runs demo-cpu-3, never another
        said = re.findall(r"demo-cpu(?:-\d)?(?= \(what `make demo` runs)", t.description)
        here = "(what `make demo` runs)" in t.description
        assert (t.id == "demo-cpu-3") == here, t.description
        assert said in ([], ["demo-cpu-3"]), t.description
    listed = CliRunner().invoke(cli, ["tracks", "list", "--results", str(REPO / "results")])
    assert "builder 1.1.0" in listed.output and "builder 1.3.0" in listed.output


def test_no_issue_numbers_for_visitors_and_operators() -> None:
    """Issue numbers link to nothing a reader can open: the maintainers' pages only."""
    pages = [*(REPO / "site" / "docs" / "operators").glob("*.md")]
    pages += [*(REPO / "site" / "docs" / "security").glob("*.md")]
    pages += [*(REPO / "site" / "overrides").rglob("*.*"), REPO / "results" / "tracks.json"]
    found = [f"{p.name}: {m}" for p in pages for m in ISSUE.findall(p.read_text())]
    assert found == []


def test_a_results_folder_takes_a_tracks_new_words(tmp_path: Path) -> None:
    """A folder made under the old title is not refused: only the rules must agree."""
    track = get_track(REPO / "results", "demo-cpu-3")
    old = track.model_copy(update={"title": "Demo: five minutes on a CPU"})
    registry = tmp_path / "old"
    carry_track(registry, REPO / "results", track)
    (registry / TRACKS_FILE).write_text(json.dumps([old.model_dump(mode="json")]))
    assert carry_track(registry, REPO / "results", track)
    assert load_tracks(registry)["demo-cpu-3"].title == track.title
    changed = track.model_copy(update={"budget_s": 301.0})
    with pytest.raises(RegistryError, match="holds one version of a track"):
        carry_track(registry, REPO / "results", changed)
