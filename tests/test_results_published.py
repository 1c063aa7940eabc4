"""`toolkit.results.published`: what a results folder publishes is read without leaving it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolkit.results.published import (
    NotPublishedError,
    UnsafePathError,
    copy_published,
    read_published,
    tree_problems,
)


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """(results root with t/r/a.txt, a folder outside it holding a secret)."""
    root = tmp_path / "results"
    (root / "t" / "r").mkdir(parents=True)
    (root / "t" / "r" / "a.txt").write_text("published\n")
    outside = tmp_path / "keys"
    outside.mkdir()
    (outside / "a.txt").write_text("SECRET\n")
    return root, outside


def test_a_plain_file_is_read(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    assert read_published(root, "t/r/a.txt") == b"published\n"
    assert tree_problems(root, "t/r") == []


@pytest.mark.parametrize("where", ["t", "t/r", "t/r/a.txt"])
def test_a_symlink_anywhere_on_the_path_is_refused_and_named(
    layout: tuple[Path, Path], where: str
) -> None:
    root, outside = layout
    link = root / where
    real = link.with_name(link.name + ".real")
    link.rename(real)
    # The link leads to a place where the same path holds the secret.
    target = {"t": outside.parent / "elsewhere", "t/r": outside, "t/r/a.txt": outside / "a.txt"}
    if where == "t":
        (target["t"] / "r").mkdir(parents=True)
        (target["t"] / "r" / "a.txt").write_text("SECRET\n")
    os.symlink(target[where], link)
    with pytest.raises(UnsafePathError, match=rf"^{link}: a symlink, refused"):
        read_published(root, "t/r/a.txt")
    problems = tree_problems(root, "t/r")
    assert len(problems) == 1 and problems[0].startswith(f"{link}: a symlink"), problems


def test_a_link_one_level_deeper_is_named_by_the_tree_check(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    os.symlink(outside, root / "t" / "r" / "candidates")
    os.symlink(outside / "a.txt", root / "t" / "r" / "deep.txt")
    (root / "t" / "r" / "sub").mkdir()
    os.symlink(outside, root / "t" / "r" / "sub" / "further")
    problems = tree_problems(root, "t/r")
    assert [p.split(": ", 1)[0] for p in problems] == [
        str(root / "t" / "r" / "candidates"),
        str(root / "t" / "r" / "deep.txt"),
        str(root / "t" / "r" / "sub" / "further"),
    ]
    with pytest.raises(UnsafePathError, match="candidates: a symlink"):
        read_published(root, "t/r/candidates/a.txt")


def test_a_hard_link_is_refused(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    os.link(outside / "a.txt", root / "t" / "r" / "key.txt")
    with pytest.raises(UnsafePathError, match=r"key.txt: a hard link \(2 names"):
        read_published(root, "t/r/key.txt")
    assert [p.split(": ", 1)[0] for p in tree_problems(root, "t/r")] == [
        str(root / "t" / "r" / "key.txt")
    ]


@pytest.mark.parametrize("rel", ["../keys/a.txt", "/etc/passwd", "t/../../keys/a.txt", "t//r"])
def test_a_path_that_could_leave_the_root_is_refused(layout: tuple[Path, Path], rel: str) -> None:
    root, _ = layout
    with pytest.raises(UnsafePathError, match="not a plain path inside the results folder"):
        read_published(root, rel)


def test_a_fifo_is_refused_without_hanging(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    os.mkfifo(root / "t" / "r" / "pipe")
    with pytest.raises(UnsafePathError, match="pipe: not a plain file"):
        read_published(root, "t/r/pipe")
    assert tree_problems(root, "t/r")[0].startswith(f"{root / 't' / 'r' / 'pipe'}: not a plain")


def test_absent_is_its_own_error(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    with pytest.raises(NotPublishedError, match="no such file"):
        read_published(root, "t/r/none.txt")
    assert tree_problems(root, "t/none") == []


def test_copy_refuses_a_link_and_copies_a_plain_file(
    layout: tuple[Path, Path], tmp_path: Path
) -> None:
    root, outside = layout
    copy_published(root, "t/r/a.txt", tmp_path / "out.txt")
    assert (tmp_path / "out.txt").read_bytes() == b"published\n"
    assert os.stat(root / "t" / "r" / "a.txt").st_nlink == 1  # a copy, not a second name
    os.symlink(outside / "a.txt", root / "t" / "r" / "b.txt")
    with pytest.raises(UnsafePathError, match="a symlink"):
        copy_published(root, "t/r/b.txt", tmp_path / "out2.txt")
    assert not (tmp_path / "out2.txt").exists()
