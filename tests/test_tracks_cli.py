"""`toolkit tracks list / show / new / schema`, and the track schema's documentation."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from exam_builder.manifest import load_manifest
from toolkit.cli import cli
from toolkit.commands.tracks import markdown_tables
from toolkit.run.inputs import DEMO_BANK, built_exam
from toolkit.tracks.model import get_track, load_tracks

REPO = Path(__file__).resolve().parents[1]


def test_the_docs_list_every_field_as_the_models_say() -> None:
    """site/docs/maintainers/tracks.md ends with `toolkit tracks schema --markdown`: a field
    added to a track without regenerating the page fails here (regenerate it with that)."""
    page = (REPO / "site" / "docs" / "maintainers" / "tracks.md").read_text()
    assert page.endswith(markdown_tables()), "regenerate: toolkit tracks schema --markdown"


def test_list_and_show() -> None:
    results = ["--results", str(REPO / "results")]
    listed = CliRunner().invoke(cli, ["tracks", "list", *results])
    assert listed.exit_code == 0 and "v1-h100-1h" in listed.output and "demo-cpu-3" in listed.output
    shown = CliRunner().invoke(cli, ["tracks", "show", "demo-cpu-3", *results])
    assert json.loads(shown.output)["id"] == "demo-cpu-3"
    bad = CliRunner().invoke(cli, ["tracks", "show", "nope", *results])
    assert bad.exit_code == 2 and "unknown track 'nope'" in bad.output


def test_new_track_for_a_new_exam(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    shutil.copy(REPO / "results" / "tracks.json", results)
    exam = built_exam(DEMO_BANK, "demo")
    argv = ["tracks", "new", "demo2-cpu", "--from", "demo-cpu-3", "--exam", str(exam)]
    argv += ["--title", "Demo 2", "--budget", "120", "--publish-prefix", "10"]
    done = CliRunner().invoke(cli, [*argv, "--results", str(results)])
    assert done.exit_code == 0, done.output
    track = get_track(results, "demo2-cpu")
    assert track.title == "Demo 2" and track.budget_s == 120 and track.protocol_revision == 1
    assert len(track.exam_sha256) == 10
    floor = load_manifest(exam.parent).quality.chance_floor
    assert floor is not None and track.chance_floor == floor > 0  # published with the track
    assert track.per_call_limit_s <= 120 and track.reserved_s <= 30
    # Its description is its own, written from its numbers: not the base's "300 seconds".
    base = get_track(REPO / "results", "demo-cpu-3")
    assert track.description != base.description and "2 minutes of wall-clock" in track.description
    assert "300 seconds" not in track.description
    assert sorted(load_tracks(results)) == [
        "demo-cpu",
        "demo-cpu-2",
        "demo-cpu-3",
        "demo2-cpu",
        "v1-h100-1h",
    ]
    again = CliRunner().invoke(cli, [*argv, "--results", str(results)])
    assert again.exit_code == 1 and "exists already" in again.output


def test_a_new_track_takes_no_floor_from_a_missing_or_stale_manifest(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    shutil.copy(REPO / "results" / "tracks.json", results)
    exam = tmp_path / "exam"
    exam.mkdir()
    shutil.copy(built_exam(DEMO_BANK, "demo"), exam / "exam.jsonl")
    argv = ["tracks", "new", "t1", "--from", "demo-cpu-3", "--exam", str(exam), "--title", "T"]
    done = CliRunner().invoke(cli, [*argv, "--results", str(results)])
    assert done.exit_code == 0 and "chance floor not measured" in done.output, done.output
    assert get_track(results, "t1").chance_floor is None
    manifest = json.loads((built_exam(DEMO_BANK, "demo").parent / "manifest.json").read_text())
    manifest["exam_sha256"] = "0" * 64  # describes another exam
    (exam / "manifest.json").write_text(json.dumps(manifest))
    argv[2] = "t2"
    done = CliRunner().invoke(cli, [*argv, "--results", str(results)])
    assert done.exit_code == 0 and get_track(results, "t2").chance_floor is None, done.output


def test_rebudgeted_official_track_does_not_claim_an_hour(tmp_path: Path) -> None:
    """`--from v1-h100-1h --budget 300` used to keep "one hour of wall-clock time"."""
    results = tmp_path / "results"
    results.mkdir()
    shutil.copy(REPO / "results" / "tracks.json", results)
    exam = built_exam(DEMO_BANK, "demo")
    argv = ["tracks", "new", "v1-300s", "--from", "v1-h100-1h", "--exam", str(exam)]
    done = CliRunner().invoke(
        cli, [*argv, "--title", "5 min", "--budget", "300", "--results", str(results)]
    )
    assert done.exit_code == 0, done.output
    text = get_track(results, "v1-300s").description
    assert "hour" not in text and text.startswith("A copy of track 'v1-h100-1h'")
    assert "5 minutes of wall-clock time on 1x NVIDIA H100 80GB" in text
    own = CliRunner().invoke(
        cli,
        [
            *argv[:2],
            "v1-own",
            *argv[3:],
            "--title",
            "x",
            "--budget",
            "300",
            "--description",
            "Mine.",
            "--results",
            str(results),
        ],
    )
    assert own.exit_code == 0, own.output
    assert get_track(results, "v1-own").description == "Mine."


def test_list_shows_every_exam_hash_with_one_prefix_length() -> None:
    """An official track publishes an 8-digit prefix of its hidden exam's hash: the list
    mixed those with 12-digit ones of the demo tracks (issue 39)."""
    listed = CliRunner().invoke(cli, ["tracks", "list", "--results", str(REPO / "results")])
    rows = [line.split("│") for line in listed.output.splitlines() if line.count("│") == 8]
    hashes = {cells[4].strip() for cells in rows}
    assert len(rows) >= 3 and {len(h) for h in hashes} == {8}, hashes
