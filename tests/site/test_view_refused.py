"""`toolkit view`: a bad result file costs its own row only (one mkdocs build, no browser).

The view builds the leaderboard with `ARI_SKIP_BAD_RESULTS=1`: the other rows are shown and
each refused file is listed with its reason (a truncated file, a run folder that is a link).
"""

from __future__ import annotations

import os
from pathlib import Path

from results_factory import run_dict, track_dict, write_registry, write_run

from toolkit.view import SiteBuilder, checkout_config


def test_the_view_shows_the_other_rows_and_lists_each_refused_file(tmp_path: Path) -> None:
    results = tmp_path / "results"
    write_registry(results, [track_dict()])
    write_run(results, run_dict("good", model="good-model"))
    linked = write_run(results, run_dict("linked", model="linked-model", seed=1), {"a.txt": "x"})
    outside = tmp_path / "operator"
    outside.mkdir()
    (outside / "a.txt").write_text("HIDDEN GRADING LINE\n")
    folder = linked.with_suffix("")
    (folder / "a.txt").unlink()
    folder.rmdir()
    os.symlink(outside, folder)
    (results / "v1-test" / "truncated.json").write_text('{"run_id": "trun')

    builder = SiteBuilder(results, tmp_path / "site", checkout_config())
    builder.build()
    assert builder.error is None
    site = tmp_path / "site"
    board = (site / "leaderboards" / "v1-test.html").read_text(encoding="utf-8")
    assert "good-model" in board and "linked-model" not in board
    refused = (site / "refused.html").read_text(encoding="utf-8")
    assert "v1-test/linked: a symlink, refused" in refused
    assert "v1-test/truncated.json: invalid JSON" in refused
    assert not any(b"HIDDEN GRADING" in f.read_bytes() for f in site.rglob("*") if f.is_file())
