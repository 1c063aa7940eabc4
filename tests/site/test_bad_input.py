"""Bad input in results/ fails `mkdocs build` with one message naming the file and the field."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from site_fixture import build, run_dict, track_dict, write_registry, write_run


def _good(results: Path) -> None:
    write_registry(results, [track_dict(), track_dict("demo-test", demo=True)])
    write_run(results, run_dict("ok0", seed=0))


def _missing_field(results: Path) -> tuple[Path, str]:
    run = run_dict("bad")
    del run["timings"]
    return write_run(results, run), "timings"


def _wrong_type(results: Path) -> tuple[Path, str]:
    return write_run(results, run_dict("bad", seed="one")), "seed"


def _negative_score(results: Path) -> tuple[Path, str]:
    run = run_dict("bad", score={"percent": -1.0, "passed": 0, "total": 100})
    return write_run(results, run), "score.percent"


def _unknown_track(results: Path) -> tuple[Path, str]:
    return write_run(results, run_dict("bad", track="v7-unknown")), "track"


def _duplicate_run_id(results: Path) -> tuple[Path, str]:
    return write_run(results, run_dict("ok0", track="demo-test")), "run_id"


def _invalid_json(results: Path) -> tuple[Path, str]:
    path = results / "v1-test" / "bad.json"
    path.write_text('{"run_id": "bad", "seed": }', encoding="utf-8")
    return path, "line 1"


def _bad_registry(results: Path) -> tuple[Path, str]:
    path = results / "tracks.json"
    tracks = json.loads(path.read_text(encoding="utf-8"))
    tracks[1]["size_limit_bytes"] = "16 MB"
    path.write_text(json.dumps(tracks), encoding="utf-8")
    return path, "1.size_limit_bytes"


CASES: dict[str, Callable[[Path], tuple[Path, str]]] = {
    "missing-field": _missing_field,
    "wrong-type": _wrong_type,
    "negative-score": _negative_score,
    "unknown-track": _unknown_track,
    "duplicate-run-id": _duplicate_run_id,
    "invalid-json": _invalid_json,
    "bad-registry": _bad_registry,
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_fails_the_build(tmp_path: Path, case: str) -> None:
    results = tmp_path / "results"
    _good(results)
    bad_file, field = CASES[case](results)
    done = build(results, tmp_path / "public")
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    errors = [line for line in output.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1, output
    assert str(bad_file) in errors[0], errors[0]
    assert field in errors[0], errors[0]
    assert "Traceback" not in output


def test_a_good_fixture_builds(tmp_path: Path) -> None:
    """The baseline that every bad case starts from is itself fine."""
    _good(tmp_path / "results")
    done = build(tmp_path / "results", tmp_path / "public")
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_missing_results_folder_fails_the_build_naming_it(tmp_path: Path) -> None:
    """A typo in ARI_RESULTS_DIR must not publish an empty leaderboard."""
    missing = tmp_path / "no-such-results"
    done = build(missing, tmp_path / "public")
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    errors = [line for line in output.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1 and str(missing) in errors[0] and "does not exist" in errors[0]
    assert "Traceback" not in output
    assert not (tmp_path / "public" / "index.html").exists()


def test_a_total_that_is_not_the_tracks_fails_the_build(tmp_path: Path) -> None:
    results = tmp_path / "results"
    _good(results)
    bad = write_run(
        results,
        run_dict("bad", seed=1, score={"percent": 50.0, "passed": 1, "total": 2}, families={}),
    )
    done = build(results, tmp_path / "public")
    errors = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("ERROR")]
    assert done.returncode != 0 and len(errors) == 1
    assert str(bad) in errors[0] and "'score.total'" in errors[0]
