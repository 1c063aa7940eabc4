"""`toolkit leaderboard`: table, CSV and JSON agree with the statistics; bad input is one line."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from click.testing import CliRunner
from results_factory import run_dict, track_dict, write_registry, write_run

from toolkit.cli import cli


def _results(tmp_path: Path) -> Path:
    results = tmp_path / "results"
    write_registry(results, [track_dict(), track_dict("demo-test", demo=True)])
    for i, p in enumerate([60, 70, 80]):
        write_run(results, run_dict(f"a{i}", model="alpha", seed=i, passed=p))
    write_run(results, run_dict("b0", model="beta", effort="high", passed=10))
    write_run(results, run_dict("b1", model="beta", effort="high", seed=1, status="invalid"))
    return results


def test_table(tmp_path: Path) -> None:
    out = CliRunner().invoke(cli, ["leaderboard", "--results", str(_results(tmp_path))])
    assert out.exit_code == 0, out.output
    assert "alpha" in out.output and "70.0 ± 5.8" in out.output
    assert "10.0 ± n/a" in out.output and "provisional" in out.output
    assert "1 awaiting rerun" in out.output
    assert out.output.index("alpha") < out.output.index("beta")


def test_csv_and_json(tmp_path: Path) -> None:
    results = str(_results(tmp_path))
    out = CliRunner().invoke(cli, ["leaderboard", "--results", results, "--format", "csv"])
    assert out.exit_code == 0, out.output
    rows = list(csv.DictReader(io.StringIO(out.output)))
    assert [(r["rank"], r["model"], r["effort"], r["se"]) for r in rows] == [
        ("1", "alpha", "", "5.773502691896258"),
        ("2", "beta", "high", ""),
    ]
    assert [(r["rank_best"], r["rank_worst"]) for r in rows] == [("1", "1"), ("2", "2")]
    out = CliRunner().invoke(
        cli, ["leaderboard", "--results", results, "--format", "json", "--track", "v1-test"]
    )
    doc = json.loads(out.output)
    assert [t["id"] for t in doc["tracks"]] == ["v1-test"]
    assert doc["rows"][1]["se"] is None and doc["rows"][1]["awaiting_rerun"] == 1


def test_env_var_and_unknown_track(tmp_path: Path) -> None:
    env = {"ARI_RESULTS_DIR": str(_results(tmp_path))}
    out = CliRunner().invoke(cli, ["leaderboard", "--track", "v9"], env=env)
    assert out.exit_code == 2 and "unknown track 'v9'" in out.output


def test_empty_results(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    out = CliRunner().invoke(cli, ["leaderboard", "--results", str(tmp_path / "empty")])
    assert out.exit_code == 0 and "No tracks registered" in out.output


def test_a_missing_results_folder_fails_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent"
    for args, env in [
        (["leaderboard", "--results", str(missing)], {}),
        (["leaderboard"], {"ARI_RESULTS_DIR": str(missing)}),
        (["leaderboard", "--results", str(missing), "--format", "csv"], {}),
    ]:
        out = CliRunner().invoke(cli, args, env=env)
        assert out.exit_code == 1, out.output
        lines = out.output.strip().splitlines()
        assert len(lines) == 1 and str(missing) in lines[0] and "does not exist" in lines[0]
        assert "Traceback" not in out.output and "no results" not in out.output.lower()


def test_bad_results_is_one_line(tmp_path: Path) -> None:
    results = _results(tmp_path)
    (results / "v1-test" / "bad.json").write_text("{", encoding="utf-8")
    out = CliRunner().invoke(cli, ["leaderboard", "--results", str(results)])
    assert out.exit_code == 1
    assert "bad.json: invalid JSON" in out.output and "Traceback" not in out.output
