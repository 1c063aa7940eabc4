"""Words an operator meets on the command line and in the README (issue 39, item 7): the
campaign file the help and the campaign pages name ships with the checkout and opens, the
README's command table lists every subcommand, and a count of one reads in the singular."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import click
from click.testing import CliRunner

from toolkit.campaign.setup import open_campaign
from toolkit.cli import cli

REPO = Path(__file__).resolve().parents[2]
TOOLKIT = str(Path(sys.executable).parent / "toolkit")
DOCS = [REPO / "README.md", *sorted((REPO / "site" / "docs").glob("*/*.md"))]
CAMPAIGN_FILE = re.compile(r"toolkit campaign (?:plan|run) ([\w./-]+\.toml)")


def test_every_campaign_file_the_docs_name_ships_and_opens() -> None:
    group = cli.commands["campaign"]
    assert isinstance(group, click.Group)
    texts = [p.read_text(encoding="utf-8") for p in DOCS]
    texts += [c.help or "" for c in [group, *group.commands.values()]]
    named = {m for text in texts for m in CAMPAIGN_FILE.findall(text)}
    shipped = {n for n in named if n != "campaign.toml" and not n.startswith("/")}  # placeholders
    assert "campaigns/demo.toml" in shipped
    for name in shipped:
        assert (REPO / name).is_file(), f"the docs name {name}, which does not exist"
    campaign = open_campaign(REPO / "campaigns" / "demo.toml")
    assert campaign.track.id == "demo-cpu-3" and campaign.file.agent == "scripted"
    assert campaign.results_dir == REPO / ".ari" / "campaign-demo" / "results"
    plan = subprocess.run(
        [TOOLKIT, "campaign", "plan", "campaigns/demo.toml", "--format", "json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert plan.returncode == 0, plan.stderr
    assert "campaigns/.." not in plan.stdout


def test_the_readme_table_lists_every_subcommand() -> None:
    rows = [
        line for line in (REPO / "README.md").read_text().splitlines() if line.startswith("| `")
    ]
    for name, group in cli.commands.items():
        if not isinstance(group, click.Group):
            continue
        listed = " ".join(r.split("|")[1] for r in rows if f"`toolkit {name} " in r)
        for sub in group.commands:
            assert re.search(rf"\b{re.escape(sub)}\b", listed), f"toolkit {name} {sub}"


def test_one_document_is_one_document(tmp_path: Path) -> None:
    source = tmp_path / "one.txt"
    source.write_text("A single short document of plain text.\n" * 200)
    done = CliRunner().invoke(cli, ["data", "prepare", "--out", str(tmp_path / "out"),
                                    "--source", str(source)])  # fmt: skip
    assert done.exit_code == 0, done.output
    assert "1 document" in done.output and "1 documents" not in done.output


def test_a_track_folder_given_as_results_is_named_not_an_empty_board(tmp_path: Path) -> None:
    results = tmp_path / "results"
    track = results / "demo-cpu-3"
    track.mkdir(parents=True)
    (results / "tracks.json").write_text((REPO / "results" / "tracks.json").read_text())
    (track / "20261128T120000-scripted-baseline-s0-abcd.json").write_text("{}")
    done = CliRunner().invoke(cli, ["leaderboard", "--results", str(track)])
    assert done.exit_code == 2, done.output
    assert f"--results {results} --track demo-cpu-3" in done.output
    empty = tmp_path / "empty"  # a results folder with nothing yet: still an empty board
    empty.mkdir()
    assert CliRunner().invoke(cli, ["leaderboard", "--results", str(empty)]).exit_code == 0


def test_grading_an_empty_folder_says_so_in_one_line(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    exam = tmp_path / "exam.jsonl"
    exam.write_text("")
    done = CliRunner().invoke(cli, ["grade", str(bundle), "--exam", str(exam)])
    assert done.exit_code == 2, done.output
    assert "an empty folder: a bundle is a folder" in done.output
    assert "FileNotFoundError" not in done.output
    (bundle / "weights.bin").write_bytes(b"\0")
    done = CliRunner().invoke(cli, ["grade", str(bundle), "--exam", str(exam)])
    assert done.exit_code == 2 and "no inference.py there" in done.output
