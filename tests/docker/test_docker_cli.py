"""The docker backend through the command line: `toolkit grade --backend docker`, `images`."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from toolkit.cli import cli
from toolkit.images import ROLES

ANSWER_SPACES = """
class Model:
    def generate(self, prompts, lengths):
        return [b" " * n for n in lengths]


def load(bundle_dir, device):
    return Model()
"""


def test_grade_in_a_container(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "inference.py").write_text(ANSWER_SPACES)
    exam = tmp_path / "exam" / "exam.jsonl"
    exam.parent.mkdir()
    questions = [
        {"id": "q1", "family": "lists", "prompt": "a b c", "answer": "  "},
        {"id": "q2", "family": "lists", "prompt": "d e f", "answer": "xy"},
    ]
    exam.write_text(
        "".join(json.dumps(q, sort_keys=True, separators=(",", ":")) + "\n" for q in questions)
    )
    report = tmp_path / "report.json"
    result = CliRunner().invoke(
        cli,
        ["grade", str(bundle), "--exam", str(exam), "--backend", "docker", "--json", str(report)],
    )
    assert result.exit_code == 0, result.output
    graded = json.loads(report.read_text())
    assert graded["backend"] == "docker" and graded["score"]["passed"] == 1
    assert "container" in graded["isolation"] and "netns" in graded["isolation"]


def test_images_list_and_pins_round_trip(tmp_path: Path) -> None:
    listing = CliRunner().invoke(cli, ["images", "list"])
    assert listing.exit_code == 0, listing.output
    lines = listing.output.strip().splitlines()
    assert [line.split()[0] for line in lines] == list(ROLES)
    pins = {line.split()[0]: line.split()[2] for line in lines}
    path = tmp_path / "images.json"
    path.write_text(json.dumps(pins))
    pinned = CliRunner().invoke(cli, ["images", "list", "--images", str(path)])
    assert pinned.exit_code == 0, pinned.output
    assert all(pins[role] in pinned.output for role in ROLES)
