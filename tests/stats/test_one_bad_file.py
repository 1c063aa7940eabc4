"""Issue 50 item 3: one bad file costs its own file, with its reason, and nothing else.

Each attack of `bad_files` is put into a folder of two good runs. The loader (strict: one line
naming the file; keep going: that file refused, the rest loaded), `toolkit leaderboard` (the
board, the refused line, exit status 1) and `toolkit runs validate` (a line naming it, exit
status 1) each finish in seconds, with no traceback, and read no more than their caps.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from bad_files import ATTACKS, good_folder, index_track, long_model
from click.testing import CliRunner
from results_factory import run_dict, track_dict, write_registry, write_run

from toolkit.cli import cli
from toolkit.results.model import ResultsError
from toolkit.results.signing import KEYRING_FILE, SigningError, load_keyring
from toolkit.stats import leaderboard, load_results
from toolkit.tracks.model import RESERVED_TRACK_IDS, RegistryError


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_the_loader_refuses_the_file_alone(tmp_path: Path, attack: str) -> None:
    results = good_folder(tmp_path)
    name, words = ATTACKS[attack](results)
    start = time.monotonic()
    with pytest.raises(ResultsError) as strict:
        load_results(results)
    assert name in str(strict.value) and words in str(strict.value)
    loaded = load_results(results, keep_going=True)
    assert [r.result.run_id for r in loaded.runs if r.result.run_id.startswith("good")] == [
        "good0",
        "good1",
    ]
    assert len(loaded.refused) == 1 and name in loaded.refused[0], loaded.refused
    assert words in loaded.refused[0]
    assert time.monotonic() - start < 30


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_leaderboard_and_validate_name_the_file(tmp_path: Path, attack: str) -> None:
    results = good_folder(tmp_path)
    name, _ = ATTACKS[attack](results)
    board = CliRunner().invoke(cli, ["leaderboard", "--results", str(results)])
    assert board.exit_code == 1 and isinstance(board.exception, SystemExit), board.output
    assert "alpha" in board.stdout and "refused:" in board.stderr and name in board.stderr
    check = CliRunner().invoke(cli, ["runs", "validate", str(results)])
    assert isinstance(check.exception, SystemExit) and check.exit_code == 1, check.output
    assert name in check.stderr and "Traceback" not in check.output
    assert "ok: " in check.stdout and "good0.json" in check.stdout


def test_a_long_model_name_gets_a_short_page_name(tmp_path: Path) -> None:
    results = good_folder(tmp_path)
    model = long_model(results)
    other = model[:-1] + "x"  # the same first 64 characters: told apart by a hash
    write_run(results, run_dict("long1", model=other))
    rows = leaderboard(load_results(results), "v1-test")
    slugs = {r.model: r.slug for r in rows}
    assert all(len(s) <= 64 for s in slugs.values()) and slugs[model].startswith("m" * 40)
    assert slugs[model] != slugs[other]


def test_a_track_named_like_a_page_of_the_site_is_refused(tmp_path: Path) -> None:
    results = good_folder(tmp_path)
    index_track(results)
    with pytest.raises(RegistryError, match=r"tracks.json: field '1.id': .*'index' names a page"):
        load_results(results)
    for track_id in RESERVED_TRACK_IDS:
        write_registry(results, [track_dict(), track_dict(track_id)])
        with pytest.raises(RegistryError, match=r"field '1\.id'"):
            load_results(results)


@pytest.mark.parametrize("attack", [a for a in ATTACKS if a.startswith("signing_keys.json")])
def test_every_key_list_reader_refuses_it(tmp_path: Path, attack: str) -> None:
    """A key list named by a maintainer may be a link, but never a FIFO, a device or huge:
    `load_keyring` (pinned lists, and the harness adding its key to a folder) refuses them
    too, at once."""
    results = good_folder(tmp_path)
    ATTACKS[attack](results)
    start = time.monotonic()
    if "link out" in attack:  # a link to a good list is the maintainer's to make
        assert load_keyring(results / KEYRING_FILE).keys
    else:
        with pytest.raises(SigningError):
            load_keyring(results / KEYRING_FILE)
    assert time.monotonic() - start < 10


@pytest.mark.parametrize("name", ["tracks.json", "protocol_fixes.json"])
def test_a_deep_registry_is_one_line_naming_it(tmp_path: Path, name: str) -> None:
    results = good_folder(tmp_path)
    (results / name).write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(RegistryError, match=rf"{name}: invalid JSON at line 1: nested deeper"):
        load_results(results)
    board = CliRunner().invoke(cli, ["leaderboard", "--results", str(results)])
    assert board.exit_code == 1 and name in board.output and "Traceback" not in board.output


def test_a_control_character_in_a_hashed_path_refuses_the_run(tmp_path: Path) -> None:
    results = good_folder(tmp_path)
    write_run(results, run_dict("bad0", model="beta", files={"bad0/a\nb": "0" * 64}))
    loaded = load_results(results, keep_going=True)
    assert len(loaded.refused) == 1 and "field 'files'" in loaded.refused[0]
