"""The site's words match its rules (issue 39, an operator's day): a home page never shows an
empty table, two tracks of one title are told apart in the navigation, bits per byte is shown
as published (steps of 0.25), the unverified rule names pinned keys, and a CPU track's
methodology does not speak of a GPU or of containers it does not use. One mkdocs build."""

from __future__ import annotations

import re
from pathlib import Path

from site_fixture import build, run_dict, track_dict, write_registry, write_run

from toolkit.grading.publish import BPB_WORDS

TITLE = "Demo: five minutes on a CPU"


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_the_site_says_what_it_shows(tmp_path: Path) -> None:
    results = tmp_path / "results"
    cpu = {"hardware": "CPU (any machine)", "demo": True, "title": TITLE, "budget_s": 300}
    write_registry(
        results,
        [track_dict("demo-old", protocol_revision=2, **cpu), track_dict("demo-new", **cpu)],
        [
            {"id": "fix-1", "track": "demo-old", "date": "2026-11-01", "title": "A fix",
             "description": "Revision 2.", "revision": 2, "action": "legacy"},
        ],
    )  # fmt: skip
    old = run_dict("old0", track="demo-old", revision=1, passed=3)
    old["timings"]["budget_s"] = 300
    write_run(results, old)  # graded under the superseded revision: a legacy row only
    new = run_dict("new0", track="demo-new", passed=3, bpb=5.75)
    new["timings"]["budget_s"] = 300
    write_run(results, new)
    done = build(results, tmp_path / "public")
    assert done.returncode == 0, done.stdout + done.stderr
    site = tmp_path / "public"

    home = (site / "index.html").read_text(encoding="utf-8")
    article = home[home.index("<article") :]
    legacy_part = article[article.index("demo-old") :] if "demo-old" in article else article
    assert "legacy" in _text(article)
    # Every table on the home page has a row: none stands empty beside "(1 row, 1 run)".
    for body in re.findall(r"<tbody>(.*?)</tbody>", article, re.S):
        assert "<tr" in body, legacy_part[:2000]

    nav = _text(home)
    assert f"{TITLE} (demo-old)" in nav and f"{TITLE} (demo-new)" in nav

    board = (site / "leaderboards" / "demo-new.html").read_text(encoding="utf-8")
    assert ">5.75<" in board and "5.750" not in board
    assert "a key the maintainers have not pinned" in board
    assert "does not list" not in board

    method = _text((site / "methodology.html").read_text(encoding="utf-8"))
    assert "executes Python on the CPU" in method and "on the GPU" not in method
    assert (
        "container images (pinned by digest)" not in method
        and "in a container the agent" not in method
    )
    assert f"published {BPB_WORDS}" in method  # the code's own words (toolkit.grading.publish)
