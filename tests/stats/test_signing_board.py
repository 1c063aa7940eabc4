"""Unverified runs on the leaderboard: loaded, flagged with the reason, never counted or ranked.

What `toolkit leaderboard` and the site read (`load_results` -> `leaderboard`) must not let a
file whose signature does not hold move a row; `results_problems` (what `runs validate` adds
for a folder) names it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from results_factory import run_dict, track_dict, write_registry, write_run

from toolkit.cli import cli
from toolkit.results.model import ResultsError
from toolkit.results.signing import KEYRING_FILE
from toolkit.stats import leaderboard, load_results, results_problems, to_csv


def _folder(tmp_path: Path) -> Path:
    """Two rows of three seeds each: a-model around 30%, b-model around 60% (all signed)."""
    results = tmp_path / "results"
    write_registry(results, [track_dict()])
    for seed, (a, b) in enumerate([(30, 60), (31, 61), (29, 59)]):
        write_run(results, run_dict(f"a{seed}", model="a-model", seed=seed, passed=a))
        write_run(results, run_dict(f"b{seed}", model="b-model", seed=seed, passed=b))
    return results


def _forge(results: Path, run_id: str, **change: object) -> Path:
    path = results / "v1-test" / f"{run_id}.json"
    data = json.loads(path.read_text())
    data.update(change)
    path.write_text(json.dumps(data, indent=2))
    return path


def test_a_signed_folder_ranks_every_row(tmp_path: Path) -> None:
    results = load_results(_folder(tmp_path))
    assert all(r.unverified is None for r in results.runs)
    rows = leaderboard(results, "v1-test")
    assert [(r.model, r.rank_label, r.n) for r in rows] == [
        ("b-model", "1", 3),
        ("a-model", "2", 3),
    ]


@pytest.mark.parametrize(
    "change",
    [
        {"model": "b-model"},  # a's weak seed moved into b's row: would drag b down
        {"effort": "high"},
        {"seed": 9},
        {"score": {"percent": 99.0, "passed": 99, "total": 100}, "families": {}},
        {"status": "invalid", "status_reason": "forged"},
        {"signature": None},
    ],
    ids=["model", "effort", "seed", "score", "status", "no-signature"],
)
def test_an_edited_run_is_listed_unverified_and_never_counted(
    tmp_path: Path, change: dict[str, object]
) -> None:
    folder = _folder(tmp_path)
    path = _forge(folder, "a0", **change)
    results = load_results(folder)  # the site's and the CLI's loader: no error, a flag
    (forged,) = [r for r in results.runs if r.result.run_id == "a0"]
    assert forged.unverified and (
        "signature" in forged.unverified or "unsigned" in forged.unverified
    )
    rows = leaderboard(results, "v1-test")
    entries = {e.run_id: e for row in rows for e in row.runs}
    assert entries["a0"].role == "unverified" and not entries["a0"].counted
    assert entries["a0"].note and entries["a0"].note.startswith("unverified (")
    counted = {e.run_id for row in rows for e in row.runs if e.counted}
    assert counted == {"a1", "a2", "b0", "b1", "b2"}
    assert f"{path}: signature:" in "\n".join(results_problems(folder))


def test_a_row_of_unverified_runs_is_not_ranked(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    for seed in range(3):
        _forge(folder, f"a{seed}", model="c-model", bits_per_byte=0.1)
    rows = leaderboard(load_results(folder), "v1-test")
    c_row = next(r for r in rows if r.model == "c-model")
    assert c_row.rank is None and c_row.mean is None and len(c_row.unverified) == 3
    assert [r.model for r in rows if r.rank is not None] == ["b-model"]
    csv = to_csv(rows)
    assert "unverified" in csv.splitlines()[0]


def test_the_leaderboard_command_flags_unverified_runs(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    _forge(folder, "b0", bits_per_byte=0.1)
    done = CliRunner().invoke(cli, ["leaderboard", "--results", str(folder)])
    assert done.exit_code == 0, done.output
    assert "1 unverified run(s) (signature), not counted" in done.output


def test_a_bad_key_list_is_refused_naming_it(tmp_path: Path) -> None:
    """The folder's key list is a hint: a bad one is refused on its own (issue 50: one file
    costs only itself), and the runs are still checked against the pinned keys."""
    folder = _folder(tmp_path)
    (folder / KEYRING_FILE).write_text('{"keys": [{"id": "nope"}]}')
    with pytest.raises(ResultsError, match=KEYRING_FILE):
        load_results(folder)
    loaded = load_results(folder, keep_going=True)
    assert len(loaded.refused) == 1 and KEYRING_FILE in loaded.refused[0]
    assert loaded.runs
