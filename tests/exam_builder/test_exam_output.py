"""Where an exam may be written: never into a git working tree by accident, never over an exam,
never half-written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from exam_helpers import DEMO

from exam_builder import build as build_module
from exam_builder.build import BuildError, build_exam, git_worktree
from toolkit.cli import cli


def _worktree(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    return repo


def test_refuses_a_git_working_tree_without_the_flag(tmp_path: Path) -> None:
    repo = _worktree(tmp_path)
    out = repo / "exams" / "hidden"
    with pytest.raises(BuildError, match="inside the git working tree"):
        build_exam(DEMO, out, english_text=None)
    assert not out.exists()
    manifest = build_exam(DEMO, out, english_text=None, allow_in_repo=True)
    assert (out / "exam.jsonl").is_file() and manifest.questions == 100


def test_cli_refuses_the_repo_itself(tmp_path: Path) -> None:
    out = Path(__file__).resolve().parent / "never-written"
    if git_worktree(out) is None:
        pytest.skip("this checkout is not a git working tree (e.g. an unpacked archive)")
    result = CliRunner().invoke(cli, ["build-exam", "--bank", str(DEMO), "--out", str(out)])
    assert result.exit_code == 1
    assert "--allow-in-repo" in result.output
    assert not out.exists()


def test_git_worktree_finds_the_root(tmp_path: Path) -> None:
    repo = _worktree(tmp_path)
    assert git_worktree(repo / "a" / "b") == repo
    assert git_worktree(repo / ".." / "elsewhere") is None  # tmp dirs are outside any repo


def test_refuses_to_overwrite_an_exam(tmp_path: Path) -> None:
    out = tmp_path / "exam"
    build_exam(DEMO, out, english_text=None)
    before = (out / "exam.jsonl").read_bytes()
    with pytest.raises(BuildError, match="already exists"):
        build_exam(DEMO, out, english_text=None)
    (out / "exam.jsonl").unlink()  # a manifest alone also blocks: it describes some exam
    with pytest.raises(BuildError, match=r"manifest\.json: already exists"):
        build_exam(DEMO, out, english_text=None)
    assert before  # the first build was complete


def test_other_files_in_the_output_directory_are_fine(tmp_path: Path) -> None:
    out = tmp_path / "exam"
    out.mkdir()
    (out / "README").write_text("notes", encoding="utf-8")
    build_exam(DEMO, out, english_text=None)
    assert sorted(p.name for p in out.iterdir()) == ["README", "exam.jsonl", "manifest.json"]


def test_nothing_half_written_when_writing_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    real_link = os.link

    def failing_link(src: str, dst: str) -> None:
        calls.append(dst)
        if str(dst).endswith("manifest.json"):
            raise OSError("disk full")
        real_link(src, dst)

    monkeypatch.setattr(build_module.os, "link", failing_link)
    out = tmp_path / "exam"
    with pytest.raises(OSError, match="disk full"):
        build_exam(DEMO, out, english_text=None)
    assert len(calls) == 2
    assert list(out.iterdir()) == []  # no exam without manifest, no temp files left


def test_progress_reaches_the_total_in_both_stages(tmp_path: Path) -> None:
    seen: dict[str, list[tuple[int, int]]] = {}
    build_exam(
        DEMO,
        tmp_path / "exam",
        english_text=None,
        progress=lambda stage, done, total: seen.setdefault(stage, []).append((done, total)),
    )
    assert set(seen) == {"generate", "quality"}
    for calls in seen.values():
        assert calls[-1] == (100, 100)
        assert [d for d, _ in calls] == sorted(d for d, _ in calls)
