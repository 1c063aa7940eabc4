"""`load_results`: each bad input is one error naming the file and the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from results_factory import run_dict, track_dict, write_registry, write_run

from toolkit.results.model import ResultsError
from toolkit.stats import load_results, results_problems
from toolkit.tracks.model import RegistryError


def _results(tmp_path: Path) -> Path:
    results = tmp_path / "results"
    write_registry(results, [track_dict(), track_dict("demo-test", demo=True)])
    write_run(results, run_dict("ok", seed=0))
    return results


def test_a_missing_folder_is_an_error_naming_it(tmp_path: Path) -> None:
    """A typo in --results or ARI_RESULTS_DIR must not publish an empty leaderboard."""
    with pytest.raises(ResultsError, match="the results folder does not exist") as info:
        load_results(tmp_path / "nope")
    assert str(tmp_path / "nope") in str(info.value) and "\n" not in str(info.value)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ResultsError, match="is not a folder"):
        load_results(tmp_path / "file")


def test_an_empty_folder_loads_empty(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    empty = load_results(tmp_path / "empty")
    assert empty.tracks == {} and empty.runs == [] and empty.fixes == []


def test_registry_only(tmp_path: Path) -> None:
    results = tmp_path / "results"
    write_registry(results, [track_dict()])
    loaded = load_results(results)
    assert list(loaded.tracks) == ["v1-test"] and loaded.runs == []


def _expect(results: Path, file: Path, field: str) -> None:
    with pytest.raises(ResultsError) as info:
        load_results(results)
    message = str(info.value)
    assert "\n" not in message
    assert str(file) in message, message
    assert f"'{field}'" in message, message


def _drop(d: dict[str, Any], dotted: str) -> dict[str, Any]:
    *parents, last = dotted.split(".")
    node = d
    for p in parents:
        node = node[p]
    del node[last]
    return d


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: _drop(d, "score"), "score"),
        (lambda d: _drop(d, "config.exam_sha256"), "config.exam_sha256"),
        (lambda d: {**d, "seed": "zero"}, "seed"),
        (lambda d: {**d, "bits_per_byte": "low"}, "bits_per_byte"),
        (lambda d: {**d, "score": {"percent": -5.0, "passed": 0, "total": 100}}, "score.percent"),
        (lambda d: {**d, "status": "great"}, "status"),
    ],
    ids=["missing-score", "missing-nested", "wrong-type", "wrong-type-float", "negative", "enum"],
)
def test_bad_field(tmp_path: Path, mutate: Any, field: str) -> None:
    results = _results(tmp_path)
    bad = write_run(results, mutate(run_dict("bad", seed=1)))
    _expect(results, bad, field)


def test_invalid_json(tmp_path: Path) -> None:
    results = _results(tmp_path)
    bad = results / "v1-test" / "broken.json"
    bad.write_text('{"run_id": "broken", ', encoding="utf-8")
    with pytest.raises(ResultsError, match=r"broken\.json: invalid JSON at line 1"):
        load_results(results)


def test_unknown_track(tmp_path: Path) -> None:
    results = _results(tmp_path)
    bad = write_run(results, run_dict("x", track="v9-nope"))
    _expect(results, bad, "track")


def test_track_must_match_folder(tmp_path: Path) -> None:
    results = _results(tmp_path)
    bad = results / "demo-test" / "x.json"
    bad.parent.mkdir()
    bad.write_text(json.dumps(run_dict("x")), encoding="utf-8")  # says v1-test
    _expect(results, bad, "track")


def test_duplicate_run_id(tmp_path: Path) -> None:
    results = _results(tmp_path)
    bad = write_run(results, run_dict("ok", track="demo-test"))
    with pytest.raises(ResultsError, match="duplicate run id 'ok'") as info:
        load_results(results)
    assert str(bad) in str(info.value) and "'run_id'" in str(info.value)


def test_file_name_must_be_run_id(tmp_path: Path) -> None:
    results = _results(tmp_path)
    bad = results / "v1-test" / "other.json"
    bad.write_text(json.dumps(run_dict("nomatch")), encoding="utf-8")
    _expect(results, bad, "run_id")


def test_another_exam_is_not_an_error_but_off_the_rules(tmp_path: Path) -> None:
    """A run graded on another exam loads (the board lists it apart, see test_board)."""
    results = _results(tmp_path)
    run = run_dict("x", seed=1)
    run["config"]["exam_sha256"] = "f" * 64
    run["score"] = {"percent": 50.0, "passed": 10, "total": 20}  # that exam's total
    run["families"] = {}
    write_run(results, run)
    assert load_results(results).run("x").result.score.total == 20


@pytest.mark.parametrize(
    ("score", "message"),
    [
        ({"percent": 50.0, "passed": 1, "total": 2}, "2 questions, but the exam of track"),
        ({"percent": 0.0, "passed": 0, "total": 0}, "greater than 0"),
    ],
    ids=["total-2-of-100", "zero-of-zero"],
)
def test_total_must_be_the_tracks_exam_questions(
    tmp_path: Path, score: dict[str, Any], message: str
) -> None:
    results = _results(tmp_path)
    bad = write_run(results, run_dict("x", seed=1, score=score, families={}))
    _expect(results, bad, "score.total")
    with pytest.raises(ResultsError, match=message):
        load_results(results)


def test_families_must_add_up_to_the_score(tmp_path: Path) -> None:
    results = _results(tmp_path)
    families = {"passages": {"passed": 25, "total": 50}, "records": {"passed": 25, "total": 48}}
    bad = write_run(results, run_dict("x", seed=1, families=families))
    _expect(results, bad, "families")
    with pytest.raises(ResultsError, match=r"add up to 50/98 but the score is 50/100"):
        load_results(results)
    families = {"passages": {"passed": 30, "total": 50}, "records": {"passed": 30, "total": 50}}
    bad = write_run(results, run_dict("x", seed=1, families=families))
    with pytest.raises(ResultsError, match=r"add up to 60/100 but the score is 50/100"):
        load_results(results)
    families = {"passages": {"passed": 51, "total": 50}, "records": {"passed": 0, "total": 50}}
    write_run(results, run_dict("x", seed=1, passed=51, families=families))
    with pytest.raises(ResultsError, match=r"family 'passages': passed 51 > total 50"):
        load_results(results)


def test_every_problem_is_listed_once(tmp_path: Path) -> None:
    results = _results(tmp_path)
    score = {"percent": 50.0, "passed": 1, "total": 2}
    write_run(results, run_dict("a", seed=1, score=score, families={}))
    write_run(results, run_dict("b", seed=2, track="v9-nope"))
    problems = results_problems(results)
    assert len(problems) == 2
    assert "a.json: field 'score.total'" in problems[0] and "b.json: field 'track'" in problems[1]
    assert results_problems(tmp_path / "nope")[0].endswith(
        "to a folder holding tracks.json and <track>/<run_id>.json files"
    )


def test_future_protocol_revision(tmp_path: Path) -> None:
    results = _results(tmp_path)
    bad = write_run(results, run_dict("x", revision=5))
    _expect(results, bad, "config.protocol_revision")


def test_missing_artifact(tmp_path: Path) -> None:
    results = _results(tmp_path)
    bad = write_run(results, run_dict("x", artifacts={"transcript": "x/transcript.txt"}))
    _expect(results, bad, "artifacts.transcript")


def test_artifact_outside_results(tmp_path: Path) -> None:
    results = _results(tmp_path)
    (tmp_path / "secret.txt").write_text("no", encoding="utf-8")
    bad = write_run(results, run_dict("x", artifacts={"audit": "../../secret.txt"}))
    _expect(results, bad, "artifacts.audit")


def test_artifacts_resolve(tmp_path: Path) -> None:
    results = _results(tmp_path)
    write_run(results, run_dict("x", seed=3), artifacts={"transcript": "hello\n"})
    run = load_results(results).run("x")
    assert run.artifact_path("transcript").read_text(encoding="utf-8") == "hello\n"


def test_bad_registry_names_file_and_field(tmp_path: Path) -> None:
    results = tmp_path / "results"
    write_registry(results, [track_dict(budget_s="an hour")])
    with pytest.raises(RegistryError, match=r"tracks\.json: field '0\.budget_s'"):
        load_results(results)
