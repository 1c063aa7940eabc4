"""Model-free suspects on the board and the site; protocol revision 2 in the repository registry.

A run whose score survived the weights ablation carries a badge (with its explanation) on its
row in the leaderboard, on the row's page and on the run itself; the repository's registry is
at revision 2 on both tracks with a fix for each, and the committed demo run (graded under
revision 1) is shown as legacy, linked to its fix.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from site_fixture import REPO, build, run_dict, track_dict, write_registry, write_run

from toolkit.stats.board import leaderboard
from toolkit.stats.export import to_csv
from toolkit.stats.loading import load_results
from toolkit.tracks.model import load_fixes, load_tracks

DEMO_RUN = "20261123T122528-scripted-baseline-s0-4712"  # committed, graded under revision 1
ABLATED = {"percent": 90.0, "passed": 90, "total": 100}


def _results(tmp_path: Path) -> Path:
    results = tmp_path / "results"
    write_registry(results, [track_dict(seeds_required=1)])
    suspect = run_dict(
        "sus0", model="rules-bot", passed=95, weights_ablation=ABLATED, model_free_suspect=True
    )
    write_run(results, suspect)
    honest = run_dict(
        "hon0",
        model="trained-bot",
        passed=40,
        weights_ablation={"percent": 0.0, "passed": 0, "total": 100},
        model_free_suspect=False,
    )
    write_run(results, honest)
    write_run(results, run_dict("old0", model="older-bot", passed=30))  # before the field
    return results


def test_rows_list_their_suspect_runs(tmp_path: Path) -> None:
    results = load_results(_results(tmp_path))
    rows = {r.model: r for r in leaderboard(results, "v1-test")}
    assert rows["rules-bot"].model_free_suspects == ["sus0"]
    assert rows["trained-bot"].model_free_suspects == []
    assert rows["older-bot"].model_free_suspects == []
    assert rows["rules-bot"].rank == 1  # a diagnostic: the score and rank are unchanged
    table = {r["model"]: r for r in csv.DictReader(io.StringIO(to_csv(list(rows.values()))))}
    assert table["rules-bot"]["model_free_suspects"] == "1"
    assert table["trained-bot"]["model_free_suspects"] == "0"


def test_the_site_marks_suspects_with_an_explanation(tmp_path: Path) -> None:
    results = _results(tmp_path)
    done = build(results, tmp_path / "public")
    assert done.returncode == 0, done.stdout + done.stderr
    board = (tmp_path / "public" / "leaderboards" / "v1-test.html").read_text()
    rows = board.split("<tr class=")
    (suspect,) = [r for r in rows if 'data-model="rules-bot"' in r]
    assert "ari-badge--suspect" in suspect and "1 model-free suspect<" in suspect
    assert "weights replaced by noise" in suspect  # the tooltip says why
    assert 'href="../methodology.html#weights-ablation"' in suspect
    assert all("ari-badge--suspect" not in r for r in rows if "rules-bot" not in r)
    page = (tmp_path / "public" / "rows" / "v1-test" / "rules-bot.html").read_text()
    assert page.count("ari-badge--suspect") >= 3  # row header, runs table, the run itself
    assert "weights ablation 90/100" in page
    honest = (tmp_path / "public" / "rows" / "v1-test" / "trained-bot.html").read_text()
    assert "ari-badge--suspect" not in honest and "weights ablation 0/100" in honest
    methodology = (tmp_path / "public" / "methodology.html").read_text()
    assert 'id="weights-ablation"' in methodology
    review = tmp_path / "public" / "maintainers" / "model-free-suspects.html"
    assert "What the check cannot catch" in review.read_text()


def test_registry_is_at_revision_2_with_a_fix_per_track() -> None:
    tracks = load_tracks(REPO / "results")
    assert {t.id: t.protocol_revision for t in tracks.values()} == {
        "v1-h100-1h": 2,
        "demo-cpu": 2,
        "demo-cpu-2": 1,  # a new track (new demo exam) begins at 1, under today's protocol
        "demo-cpu-3": 1,
    }
    fixes = {f.track: f for f in load_fixes(REPO / "results", tracks)}
    assert set(fixes) == {t.id for t in tracks.values() if t.protocol_revision > 1}
    assert fixes["demo-cpu"].action == "legacy" and fixes["v1-h100-1h"].action == "rerun"
    for fix in fixes.values():
        assert fix.revision == 2 and str(fix.date) == "2026-11-25"
        for change in ["length", "fixed list of categories", "rounded", "ablation"]:
            assert change in fix.description


def test_the_committed_demo_run_is_legacy(tmp_path: Path) -> None:
    results = load_results(REPO / "results")
    runs = [json.loads(p.read_text()) for p in (REPO / "results" / "demo-cpu").glob("*.json")]
    old = {r["run_id"] for r in runs if r["config"]["protocol_revision"] == 1}
    assert DEMO_RUN in old
    rows = [r for r in leaderboard(results, "demo-cpu") if old & set(r.run_ids)]
    assert rows and all(r.legacy and r.superseded_by == "demo-cpu-r2" for r in rows)
    assert all(r.rank is None and set(r.run_ids) <= old for r in rows)
    done = build(REPO / "results", tmp_path / "public")
    assert done.returncode == 0, done.stdout + done.stderr
    board = (tmp_path / "public" / "leaderboards" / "demo-cpu.html").read_text()
    legacy = board.split("ari-board--legacy", 1)[1]
    assert "legacy r1" in legacy and 'href="../protocol-fixes.html#demo-cpu-r2"' in legacy
    fixes = (tmp_path / "public" / "protocol-fixes.html").read_text()
    assert 'id="demo-cpu-r2"' in fixes and 'id="v1-h100-1h-r2"' in fixes
    assert "scripted-baseline" in fixes.split('id="demo-cpu-r2"', 1)[1]
