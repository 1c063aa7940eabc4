"""The run page links the promoted bundle's code (`promoted-code.txt`, issue 28), so that a
reviewer reads what scored; the agent's text in it is escaped like any other artifact."""

from __future__ import annotations

from pathlib import Path

from site_fixture import build, run_dict, track_dict, write_registry, write_run

CODE = (
    "# Candidate c-0002, promoted and graded: its files but the weights\n"
    "== inference.py (40 bytes, sha256 00) ==\n"
    "exec(open('rules.txt').read())  # <script>alert(1)</script>\n"
)


def test_the_run_page_links_the_promoted_code(tmp_path: Path) -> None:
    results = tmp_path / "results"
    write_registry(results, [track_dict(seeds_required=1)])
    write_run(results, run_dict("r0", model="rules-bot", passed=60), {"promoted_code": CODE})
    write_run(results, run_dict("r1", model="plain-bot", passed=20))
    done = build(results, tmp_path / "public")
    assert done.returncode == 0, done.stdout + done.stderr
    page = (tmp_path / "public" / "rows" / "v1-test" / "rules-bot.html").read_text()
    assert "the promoted bundle&#39;s code" in page or "the promoted bundle's code" in page
    assert ">promoted_code</a>" in page
    plain = (tmp_path / "public" / "rows" / "v1-test" / "plain-bot.html").read_text()
    assert "promoted bundle" not in plain
    logs = "".join(p.read_text() for p in (tmp_path / "public").rglob("*.html"))
    assert "exec(open(" in logs and "<script>alert(1)</script>" not in logs
