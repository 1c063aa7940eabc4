"""The site shows a run whose signature does not hold as unverified, with the reason, and
leaves it out of every mean and rank; the build still succeeds (one mkdocs build)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from site_fixture import build, run_dict, track_dict, write_registry, write_run


def test_an_unverified_run_is_flagged_and_never_ranked(tmp_path: Path) -> None:
    results = tmp_path / "results"
    write_registry(results, [track_dict()])
    write_run(results, run_dict("honest", model="honest-model", passed=40))
    forged = write_run(results, run_dict("forged", model="forged-model", passed=10))
    data = json.loads(forged.read_text())
    data["score"] = {"percent": 90.0, "passed": 90, "total": 100}  # signed as 10 passed
    data["families"] = {}
    forged.write_text(json.dumps(data, indent=2))
    done = build(results, tmp_path / "public")
    assert done.returncode == 0, done.stdout + done.stderr
    site = tmp_path / "public"
    board = (site / "leaderboards" / "v1-test.html").read_text(encoding="utf-8")
    ranks = dict(
        (model, rank)
        for rank, model in re.findall(r'data-rank="([^"]*)" data-model="([^"]*)"', board)
    )
    assert ranks == {"honest-model": "1", "forged-model": ""}, ranks
    assert "1 unverified" in board and "90.0" not in board
    row = (site / "rows" / "v1-test" / "forged-model.html").read_text(encoding="utf-8")
    assert "no: unverified" in row and "does not match the content" in row
    honest = (site / "rows" / "v1-test" / "honest-model.html").read_text(encoding="utf-8")
    assert "holds: key <code>ed25519:" in honest
