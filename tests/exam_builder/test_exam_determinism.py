"""Same bank => same bytes and hash, whatever the process; a new seed => every question new."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from exam_helpers import DEMO

from exam_builder.bank import load_bank
from exam_builder.exam_file import load_exam, serialize, sha256_file
from exam_builder.generate import generate_questions

BUILD = """
import sys
from pathlib import Path
from exam_builder.build import build_exam
m = build_exam(Path(sys.argv[1]), Path(sys.argv[2]), english_text=None)
print(m.exam_sha256)
"""


def _build_in_process(out: Path, cwd: Path, hashseed: str, locale: str) -> str:
    env = dict(os.environ, PYTHONHASHSEED=hashseed, LC_ALL=locale, LANG=locale)
    done = subprocess.run(
        [sys.executable, "-c", BUILD, str(DEMO), str(out)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_same_bank_same_bytes_across_processes(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b" / "deeper").mkdir(parents=True)
    hash_a = _build_in_process(tmp_path / "out-a", tmp_path / "a", "1", "C")
    hash_b = _build_in_process(tmp_path / "out-b", tmp_path / "b" / "deeper", "4242", "C.UTF-8")
    bytes_a = (tmp_path / "out-a" / "exam.jsonl").read_bytes()
    bytes_b = (tmp_path / "out-b" / "exam.jsonl").read_bytes()
    assert bytes_a == bytes_b
    assert hash_a == hash_b == sha256_file(tmp_path / "out-a" / "exam.jsonl")
    # ... and equal to this process's own generation, and the manifests agree too.
    assert serialize(generate_questions(load_bank(DEMO))) == bytes_a
    assert serialize(generate_questions(DEMO)) == bytes_a  # a path works too
    manifest_a = (tmp_path / "out-a" / "manifest.json").read_bytes()
    assert manifest_a == (tmp_path / "out-b" / "manifest.json").read_bytes()
    assert json.loads(manifest_a)["exam_sha256"] == hash_a


def test_changing_the_seed_changes_every_question(demo_copy: Path) -> None:
    before = {q.id: q for q in generate_questions(load_bank(demo_copy))}
    toml = demo_copy / "bank.toml"
    text = toml.read_text(encoding="utf-8")
    toml.write_text(text.replace('seed = "', 'seed = "another '), encoding="utf-8")
    after = {q.id: q for q in generate_questions(load_bank(demo_copy))}
    assert before.keys() == after.keys()
    for qid, q in before.items():
        assert q.prompt != after[qid].prompt, qid
    assert sum(q.answer != after[qid].answer for qid, q in before.items()) >= 0.9 * len(before)


def test_bank_hash_tracks_every_file(demo_copy: Path) -> None:
    first = load_bank(demo_copy).hash
    assert load_bank(demo_copy).hash == first
    (demo_copy / "notes.txt").write_text("a maintainer's note", encoding="utf-8")
    assert load_bank(demo_copy).hash != first
    (demo_copy / "__pycache__").mkdir()
    (demo_copy / "__pycache__" / "x.pyc").write_bytes(b"junk")
    second = load_bank(demo_copy).hash
    (demo_copy / "__pycache__" / "y.pyc").write_bytes(b"more junk")
    assert load_bank(demo_copy).hash == second  # caches are not part of a bank


def test_written_exam_reads_back(tmp_path: Path) -> None:
    _build_in_process(tmp_path / "out", tmp_path, "0", "C.UTF-8")
    questions = load_exam(tmp_path / "out")
    assert len(questions) == 100
    assert serialize(questions) == (tmp_path / "out" / "exam.jsonl").read_bytes()
