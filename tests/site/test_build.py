"""`mkdocs build --strict` on fixtures: every page, download and artifact, and what they say."""

from __future__ import annotations

import csv
import html
import io
import json
import re
import shutil
from pathlib import Path

from site_fixture import (
    AUDIT_TEXT,
    EXPECTED_ORDER,
    REPO,
    TRANSCRIPT_LINES,
    build,
    run_dict,
    track_dict,
    write_registry,
    write_run,
)


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _board_rows(page: str) -> list[tuple[str, str]]:
    """(rank, model) of the main table's rows, in document order."""
    main = page.split('class="ari-board"', 1)[1].split("</table>", 1)[0]
    return re.findall(r'data-rank="([^"]*)" data-model="([^"]*)"', main)


def test_every_page_is_generated(built_site: Path) -> None:
    for page in [
        "index.html",
        "methodology.html",
        "limitations.html",
        "protocol-fixes.html",
        "downloads.html",
        "leaderboards/index.html",
        "leaderboards/v1-test.html",
        "leaderboards/demo-test.html",
        "rows/v1-test/gpt-x-high.html",
        "rows/v1-test/claude-y.html",
        "rows/v1-test/old-model-legacy-r1.html",
        "rows/demo-test/scripted-baseline.html",
        "downloads/v1-test.csv",
        "downloads/leaderboard.json",
        "downloads/run-result.schema.json",
    ]:
        assert (built_site / page).is_file(), page


def test_leaderboard_table(built_site: Path) -> None:
    page = _text(built_site / "leaderboards" / "v1-test.html")
    assert _board_rows(page) == EXPECTED_ORDER
    assert "66.0" in page and "± 2.3" in page  # gpt-x: mean 66, SE 2.31
    assert "n/a" in page  # gemini-z: one run, SE undefined
    assert "ari-badge--provisional" in page and "1 awaiting rerun" in page and "1 failed" in page
    legacy = page.split("ari-board--legacy", 1)[1]
    assert 'data-model="old-model"' in legacy and "legacy r1" in legacy
    assert 'href="../protocol-fixes.html#fix-promote"' in legacy
    chart = page.split('<svg class="ari-means"', 1)[1].split("</svg>", 1)[0]
    assert chart.count('class="dot"') == 5  # four ranked rows and the legacy one
    assert 'href="../rows/v1-test/gpt-x-high.html"' in chart


def test_row_page(built_site: Path) -> None:
    page = _text(built_site / "rows" / "v1-test" / "o-mini.html")
    assert page.count('id="run-run') == 3  # one section per run
    assert "ari-status--failed" in page and "promoted · graded" in page
    assert 'class="ari-timeline"' in page and "Effective configuration" in page
    assert "3f571c9c" + "0" * 56 in page  # the exam hash of the run's effective config
    assert re.search(r'href="\.\./\.\./logs/v1-test/run6/\d\.html#transcript-1"', page)
    assert 'href="../../runs/v1-test/run6/transcript"' in page  # the raw copy


def test_logs_are_copied_and_paginated(built_site: Path) -> None:
    raw = _text(built_site / "runs" / "v1-test" / "run0" / "transcript")
    assert raw.count("\n") == TRANSCRIPT_LINES
    assert _text(built_site / "runs" / "v1-test" / "run0" / "audit") == AUDIT_TEXT
    pages = sorted(
        (built_site / "logs" / "v1-test" / "run0").glob("*.html"), key=lambda p: int(p.stem)
    )
    assert len(pages) >= 3
    assert all(p.stat().st_size < 200_000 for p in pages)
    parts = [
        html.unescape(block.split(">", 1)[1]) for p in pages for block in _text(p).split("<pre")[1:]
    ]
    shown = [part.split("</pre>", 1)[0] for part in parts]
    assert "".join(shown) == raw  # nothing lost or doubled at page breaks; markup as text
    assert 'rel="next"' in _text(pages[0]) and 'rel="prev"' in _text(pages[-1])
    assert 'id="transcript-2"' in _text(pages[1]) or 'id="transcript-2"' in _text(pages[2])


def test_log_pages_have_the_site_header_and_an_audit_table(built_site: Path) -> None:
    page = _text(built_site / "logs" / "v1-test" / "run0" / "1.html")
    header = page.split('<header class="site-header">', 1)[1].split("</header>", 1)[0]
    for title, url in [
        ("Home", "../../../index.html"),
        ("Leaderboards", "../../../leaderboards/index.html"),
        ("Methodology", "../../../methodology.html"),
        ("Downloads", "../../../downloads.html"),
    ]:
        assert f'<a href="{url}">{title}</a>' in header, title
    table = page.split('<table class="audit">', 1)[1].split("</table>", 1)[0]
    heads = re.findall(r"<th[^>]*>([^<]*)</th>", table)
    assert heads == ["#", "Time", "Call", "Exit status", "Duration"]
    cells = [
        [html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<td[^>]*>(.*?)</td>", tr)]
        for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", table.split("<tbody>", 1)[1], re.S)
    ]
    assert cells == [
        ["1", "0.0 s", "time_left", "0", "0.0 s"],
        ["2", "0.1 s", "python starter/train.py --out 'bundles/a b'", "1", "128.3 s"],
        ["3", "3590.0 s", "python x.py", "refused: reserved window", "0.0 s"],
        [
            "4",
            "3591.0 s",
            """printf $'\\xff\\xfe<b>' {"b64": "not base64!"} binary""",
            "0",
            "0.0 s",
        ],
    ]
    assert '"argv"' not in page  # no raw JSON lines
    assert "&lt;b&gt;" in table  # the bytes' text is escaped as HTML, never markup
    binary = re.findall(r'<span class="bin" title="([^"]*)"', table)
    assert len(binary) == 2 and "not UTF-8" in binary[0] and "no known form" in binary[1]


def test_row_page_shows_every_usage_part_and_totals(built_site: Path) -> None:
    page = _text(built_site / "rows" / "v1-test" / "gpt-x-high.html")
    table = page.split('<table class="ari-usage">', 1)[1].split("</table>", 1)[0]
    heads = re.findall(r"<th[^>]*>([^<]*)</th>", table.split("</thead>", 1)[0])
    assert heads[1:] == [
        "Input", "Output", "Reasoning", "Cache read", "Cache write", "Tokens", "Cost"
    ]  # fmt: skip
    rows = {
        re.sub(r"<[^>]+>", "", cells[0]).strip(): [re.sub(r"<[^>]+>", "", c) for c in cells[1:]]
        for cells in (
            re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", tr)
            for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", table.split("<tbody>", 1)[1], re.S)
        )
    }
    assert rows["run0"] == ["1,000", "200", "300", "4,000", "500", "6,000", "$1.25"]
    assert rows["run1"] == ["2,000", "100", "—", "6,000", "0", "8,100", "$0.75"]
    assert rows["run2"] == ["—"] * 7  # reported nothing: not counted as zero
    assert rows["Total (2 of 4 runs)"] == [
        "3,000",
        "300",
        "300",
        "10,000",
        "500",
        "14,100",
        "$2.00",
    ]
    config = page.split('id="run-run0"', 1)[1]
    assert (
        "1,000 in / 200 out / 300 reasoning / 4,000 cache read / 500 cache write tokens" in config
    )


def test_downloads_match_the_table(built_site: Path) -> None:
    rows = list(csv.DictReader(io.StringIO(_text(built_site / "downloads" / "v1-test.csv"))))
    assert [(r["rank"], r["model"]) for r in rows[:4]] == EXPECTED_ORDER
    assert rows[4]["model"] == "old-model" and rows[4]["legacy"] == "True"
    doc = json.loads(_text(built_site / "downloads" / "v1-test.json"))
    assert doc["tracks"][0]["id"] == "v1-test"
    gemini = next(r for r in doc["rows"] if r["model"] == "gemini-z")
    assert gemini["se"] is None and gemini["provisional"] is True


def test_methodology_reads_the_registry(built_site: Path) -> None:
    page = _text(built_site / "methodology.html")
    assert "3f571c9c" in page and "1 hour" in page and "20 minutes" in page
    assert "5 minutes" in page and "16,000,000 bytes" in page and "1,024 bytes" in page
    for rule in ["random", "append-only", "promoted", "standard error", "invalid", "legacy"]:
        assert rule in page, rule


def test_fixes_page(built_site: Path) -> None:
    page = _text(built_site / "protocol-fixes.html")
    assert 'id="fix-promote"' in page and "old-model" in page
    assert "inv0" in page  # the invalid run awaits a rerun


def test_numbers_come_from_the_registry(tmp_path: Path) -> None:
    results = tmp_path / "results"
    write_registry(
        results,
        [track_dict(budget_s=7200, per_call_limit_s=600, exam_sha256="abcdef0123456789")],
    )
    run = run_dict("r0")
    run["config"]["exam_sha256"] = "abcdef0123456789" + "0" * 48
    write_run(results, run)
    done = build(results, tmp_path / "public")
    assert done.returncode == 0, done.stderr
    page = _text(tmp_path / "public" / "methodology.html")
    assert "2 hours" in page and "10 minutes" in page and "abcdef01" in page
    assert "3f571c9c" not in page


def test_empty_results_say_so(tmp_path: Path) -> None:
    (tmp_path / "results").mkdir()
    done = build(tmp_path / "results", tmp_path / "public")
    assert done.returncode == 0, done.stderr
    assert "No results yet" in _text(tmp_path / "public" / "index.html")
    assert "No results yet" in _text(tmp_path / "public" / "leaderboards" / "index.html")


def test_registry_only_says_so(tmp_path: Path) -> None:
    write_registry(tmp_path / "results", [track_dict()])
    done = build(tmp_path / "results", tmp_path / "public")
    assert done.returncode == 0, done.stderr
    assert "No results yet" in _text(tmp_path / "public" / "index.html")
    assert "No results yet" in _text(tmp_path / "public" / "leaderboards" / "v1-test.html")


def test_repo_results_build(tmp_path: Path) -> None:
    """The repository's own results/ (whatever it holds now) builds in strict mode."""
    done = build(REPO / "results", tmp_path / "public")
    assert done.returncode == 0, done.stdout + done.stderr


def test_maintainer_pages_join_the_nav(tmp_path: Path) -> None:
    """Pages under site/docs/maintainers/ appear in a Maintainers section, index first."""
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copytree(REPO / "site", tmp_path / "site", ignore=shutil.ignore_patterns("__pycache__"))
    maint = tmp_path / "site" / "docs" / "maintainers"
    shutil.rmtree(maint, ignore_errors=True)
    for other in ("operators", "security"):  # they link to the maintainers' real pages
        shutil.rmtree(tmp_path / "site" / "docs" / other, ignore_errors=True)
    maint.mkdir(parents=True)
    (maint / "index.md").write_text("# For exam maintainers\n", encoding="utf-8")
    (maint / "building.md").write_text("# Building an exam\n", encoding="utf-8")
    (tmp_path / "results").mkdir()
    done = build(tmp_path / "results", tmp_path / "public", config=tmp_path / "mkdocs.yml")
    assert done.returncode == 0, done.stderr
    home = _text(tmp_path / "public" / "index.html")
    assert "Maintainers" in home
    assert home.index("maintainers/index.html") < home.index("maintainers/building.html")


def _shown(markup: str) -> str:
    """The text a browser shows of `markup` (tags dropped, references read)."""
    return html.unescape(re.sub(r"<[^>]*>", "", markup))


def test_names_are_shown_literally(tmp_path: Path) -> None:
    """Markup or markdown in a model name is shown as text, never interpreted."""
    results = tmp_path / "results"
    write_registry(results, [track_dict(title="Track *one* <i>")])
    write_run(results, run_dict("r0", model="<b>evil</b>*model_x*", effort="[high](x)"))
    done = build(results, tmp_path / "public")
    assert done.returncode == 0, done.stderr
    row = _text(tmp_path / "public" / "rows" / "v1-test" / "b-evil-b-model-x-high-x.html")
    h1 = row.split("<h1", 1)[1].split("</h1>", 1)[0]
    assert "<b>" not in h1 and "<em>" not in h1 and h1.count("<a ") == 1  # the permalink
    assert "<b>evil</b>*model_x*" in _shown(h1) and "[high](x)" in _shown(h1)
    board = _text(tmp_path / "public" / "leaderboards" / "v1-test.html")
    assert "<b>evil</b>*model_x*</a>" in html.unescape(board)
    assert "<title>Track *one* &lt;i&gt; - ARI Bench</title>" in board
    assert "<i>" not in board and "<b>evil" not in board  # not in the nav, title or table


def test_row_page_lists_runs_that_do_not_count(built_site: Path) -> None:
    gpt = _text(built_site / "rows" / "v1-test" / "gpt-x-high.html")
    assert "repeat of seed 0: the seed&#39;s first scored run, run0, counts" in gpt
    assert "Seeds counted" in gpt and "3/3" in gpt and ">1–2<" in gpt
    claude = _text(built_site / "rows" / "v1-test" / "claude-y.html")
    assert "not under the track&#39;s rules: budget 600 s (track: 3600 s)" in claude
    assert "rerun" in claude and "inv0" in claude
    board = _text(built_site / "leaderboards" / "v1-test.html")
    assert "1 repeat" in board and "1 off the track's rules" in board


def test_the_pages_explain_what_they_show(built_site: Path) -> None:
    method = _text(built_site / "methodology.html")
    assert "A worked example" in method and "1–3" in method and "2–3" in method
    assert "scores 0" in method and "zero included" not in method
    assert "first scored run of each seed" in method
    official = _text(built_site / "leaderboards" / "v1-test.html")
    assert "100 hidden questions" in official
    demo = _text(built_site / "leaderboards" / "demo-test.html")
    assert "hidden questions" not in demo and "questions of the public demo exam" in demo
    limits = _text(built_site / "limitations.html")
    assert "open-source agent scaffold" not in limits
    assert "built-in <em>scripted</em> agent, which uses no model" in limits
    home = _text(built_site / "index.html")
    assert 'Last updated <time datetime="2026-11-22">' in home and 'class="ari-glance"' in home


def test_the_security_pages_join_the_nav(tmp_path: Path) -> None:
    """site/docs/security/ (the channels page) is a section of the nav, like maintainers/."""
    (tmp_path / "results").mkdir()
    done = build(tmp_path / "results", tmp_path / "public")
    assert done.returncode == 0, done.stderr
    home = _text(tmp_path / "public" / "index.html")
    assert "Security" in home and "security/channels.html" in home
    assert "bits at most" in _text(tmp_path / "public" / "security" / "channels.html")


def test_a_runs_grading_time_is_shown_as_its_bucket(tmp_path: Path) -> None:
    """A row page shows how long the hidden grading took only as a bucket, even for a file
    that holds exact seconds (written before the bucket rule)."""
    results = tmp_path / "results"
    write_registry(results, [track_dict()])
    timings = {"budget_s": 3600, "used_s": 3500, "runner_s": 3000, "grading_s": 123.456}
    write_run(results, run_dict("r0", model="gpt-x", timings=timings))
    done = build(results, tmp_path / "public")
    assert done.returncode == 0, done.stderr
    page = _text(tmp_path / "public" / "rows" / "v1-test" / "gpt-x.html")
    assert "grading 1–10 min" in page
    # The exact seconds appear nowhere as a number. (A random key fingerprint on the page may
    # hold the digits "123" inside a hex word, so the check is for the number, not the digits.)
    assert "123.4" not in page and not re.search(r"(?<![0-9a-f])123(?![0-9a-f])", page)


def test_the_docs_section_holds_operators_maintainers_and_security(tmp_path: Path) -> None:
    """The README's material lives in the published docs (issue 29 item 6): a Docs section
    with the operators', maintainers' and security pages, each reachable from the home page,
    and the README itself short, linking there (every page it links to exists)."""
    done = build(REPO / "results", tmp_path / "public")
    assert done.returncode == 0, done.stdout + done.stderr
    home = _text(tmp_path / "public" / "index.html")
    for page in (
        "operators/index.html",
        "operators/gpu.html",
        "security/index.html",
        "maintainers/layout.html",
    ):
        assert page in home, page
        assert (tmp_path / "public" / page).is_file(), page
    assert home.index("operators/index.html") < home.index("security/index.html")
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 300
    gpu = readme[readme.index("## GPU servers") :]
    gpu = gpu[: gpu.index("\n## ", 1)]
    assert len(gpu.splitlines()) <= 20 and "site/docs/operators/gpu.md" in gpu
    import re

    for target in re.findall(r"\]\((site/docs/[^)#]+)", readme):
        assert (REPO / target).is_file(), target


def test_a_demo_only_folder_says_its_track_heading_once(tmp_path: Path) -> None:
    """Issue 29 item 5: a results folder whose only runs are on the demo track (what `make
    demo` builds) showed the demo track's heading twice on the home page."""
    results = tmp_path / "results"
    write_registry(results, [track_dict("demo-test", demo=True, title="Demo heading once")])
    write_run(results, run_dict("d0", track="demo-test", model="scripted-baseline"))
    done = build(results, tmp_path / "public")
    assert done.returncode == 0, done.stdout + done.stderr
    home = _text(tmp_path / "public" / "index.html")
    headings = re.findall(r"<h2[^>]*>(.*?)</h2>", home, re.S)
    assert sum("Demo heading once" in h for h in headings) == 1, headings
    assert "scripted-baseline" in home  # the board is still there
