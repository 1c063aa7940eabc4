"""Deterministic packing, the size limit, and archives that try to write outside their folder."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
from pathlib import Path

import pytest
from grading_helpers import ORACLE, MakeBundle, MakeExam, code_questions

from toolkit.grading import BundleError, extract_bundle, grade_bundle, pack_bundle


def test_packing_is_deterministic_whatever_the_file_metadata(
    make_bundle: MakeBundle, tmp_path: Path
) -> None:
    bundle = make_bundle(ORACLE, files={"weights/a.bin": b"\x00" * 1000, "b.txt": b"hello"})
    first = pack_bundle(bundle, tmp_path / "one.tar.gz")
    os.utime(bundle / "b.txt", (1, 1))
    (bundle / "weights" / "a.bin").chmod(0o600)
    second = pack_bundle(bundle, tmp_path / "two.tar.gz")
    assert first.sha256 == second.sha256 and first.packed_bytes == second.packed_bytes
    assert first.files == 3
    with tarfile.open(first.path) as tar:
        names = tar.getnames()
        assert names == sorted(names)
        assert all(m.mtime == 0 and m.uid == 0 and m.gid == 0 for m in tar.getmembers())
    (bundle / "b.txt").write_bytes(b"hellO")
    assert pack_bundle(bundle, tmp_path / "three.tar.gz").sha256 != first.sha256


def test_symlink_in_a_bundle_folder_is_refused(make_bundle: MakeBundle, tmp_path: Path) -> None:
    bundle = make_bundle(ORACLE)
    (bundle / "link").symlink_to("/etc/passwd")
    with pytest.raises(BundleError, match="symbolic links"):
        pack_bundle(bundle, tmp_path / "out.tar.gz")


def test_archive_bundle_grades_like_the_folder(
    make_bundle: MakeBundle, make_exam: MakeExam, tmp_path: Path
) -> None:
    bundle = make_bundle(ORACLE)
    exam = make_exam(code_questions(3))
    # A submitter's own archive, with other metadata: the grader re-packs it the same way.
    archive = tmp_path / "mine.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(bundle / "inference.py", arcname="inference.py")
    by_folder = grade_bundle(bundle, exam, phases=("generate",))
    by_archive = grade_bundle(archive, exam, phases=("generate",))
    assert by_folder.sha256 == by_archive.sha256
    assert by_folder.score == by_archive.score and by_archive.score.percent == 100.0


def test_packed_size_over_the_limit_is_a_graded_failure(
    make_bundle: MakeBundle, make_exam: MakeExam
) -> None:
    bundle = make_bundle(ORACLE, files={"weights.bin": os.urandom(300_000)})
    report = grade_bundle(
        bundle, make_exam(code_questions(2)), size_limit_bytes=200_000, hidden=False
    )
    assert not report.ok and report.score.passed == 0
    assert report.packed_bytes is not None and report.packed_bytes > 200_000
    assert "over the 200,000-byte limit" in (report.reason or "")
    assert report.timings.load == 0  # never started


def test_a_huge_bundle_is_refused_without_packing_it_all(
    make_bundle: MakeBundle, make_exam: MakeExam
) -> None:
    files = {f"w{i}.bin": os.urandom(1_000_000) for i in range(4)}
    report = grade_bundle(
        make_bundle(ORACLE, files=files),
        make_exam(code_questions(1)),
        size_limit_bytes=100_000,
        hidden=False,
    )
    assert not report.ok and "packing stopped" in (report.reason or "")
    assert report.packed_bytes is None


def test_an_archive_that_unpacks_too_big_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from toolkit.grading import pack

    monkeypatch.setattr(pack, "MAX_UNPACKED_BYTES", 1000)
    archive = tmp_path / "zeros.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo("zeros.bin")
        info.size = 5000
        tar.addfile(info, io.BytesIO(bytes(5000)))
    with pytest.raises(BundleError, match=r"unpacks to more than the grader's 1,000 bytes"):
        extract_bundle(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def _evil_archive(path: Path, member: tarfile.TarInfo, data: bytes = b"pwned") -> Path:
    with tarfile.open(path, "w:gz") as tar:
        safe = tarfile.TarInfo("inference.py")
        safe.size = len(ORACLE)
        tar.addfile(safe, io.BytesIO(ORACLE.encode()))
        tar.addfile(member, io.BytesIO(data) if member.isfile() else None)
        if member.issym() or member.islnk():  # then write through the link
            through = tarfile.TarInfo(member.name + "/x" if member.issym() else member.name)
            through.size = len(data)
            tar.addfile(through, io.BytesIO(data))
    return path


@pytest.mark.parametrize("kind", ["dotdot", "absolute", "symlink", "hardlink"])
def test_unsafe_archives_are_refused_before_writing_outside(
    kind: str, tmp_path: Path, make_exam: MakeExam
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "victim.txt"
    if kind == "dotdot":
        member = tarfile.TarInfo("../outside/victim.txt")
        member.size = 5
    elif kind == "absolute":
        member = tarfile.TarInfo(str(target))
        member.size = 5
    elif kind == "symlink":
        member = tarfile.TarInfo("escape")
        member.type, member.linkname = tarfile.SYMTYPE, str(outside)
    else:
        target.write_text("original")
        member = tarfile.TarInfo("hard")
        member.type, member.linkname = tarfile.LNKTYPE, str(target)
    archive = _evil_archive(tmp_path / f"{kind}.tar.gz", member)
    dest = tmp_path / "extract" / "bundle"
    with pytest.raises(BundleError, match="not allowed"):
        extract_bundle(archive, dest)
    assert not dest.exists(), "extraction wrote something before refusing"
    assert list(outside.iterdir()) == ([target] if kind == "hardlink" else [])
    if kind == "hardlink":
        assert target.read_text() == "original"
    report = grade_bundle(archive, make_exam(code_questions(1)), hidden=False)
    assert not report.ok and "not allowed" in (report.reason or "")


def _many_members(path: Path, count: int, tail: bytes = b"") -> Path:
    """A gzip archive of `count` empty files, then `tail` (garbage) inside the same stream."""
    with gzip.open(path, "wb", compresslevel=1) as out:
        for i in range(count):
            out.write(tarfile.TarInfo(f"f{i:07d}").tobuf(format=tarfile.USTAR_FORMAT))
        out.write(tail)
    return path


def test_too_many_members_are_refused_while_streaming(tmp_path: Path) -> None:
    from toolkit.grading import pack

    # Garbage after the limit: an extractor that listed every member first would fail on it
    # with another message; refusing while streaming never reaches it.
    archive = _many_members(tmp_path / "many.tar.gz", pack.MAX_MEMBERS + 1, b"\x01" * 4096)
    with pytest.raises(BundleError, match=r"more than 10,000 entries"):
        extract_bundle(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_huge_pax_header_is_refused_without_reading_it(tmp_path: Path) -> None:
    archive = tmp_path / "pax.tar.gz"
    with gzip.open(archive, "wb", compresslevel=1) as out:
        info = tarfile.TarInfo("././@PaxHeader")
        info.type = tarfile.XHDTYPE
        info.size = 2**31  # tarfile would read all of it into one bytes object
        out.write(info.tobuf(format=tarfile.USTAR_FORMAT))
        out.write(b"\x00" * 65536)
    with pytest.raises(BundleError, match="too large"):
        extract_bundle(archive, tmp_path / "out")


def test_duplicate_members_are_refused_before_writing(tmp_path: Path) -> None:
    archive = tmp_path / "dup.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for data in (b"first", b"second"):
            info = tarfile.TarInfo("inference.py")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with pytest.raises(BundleError, match="appears twice"):
        extract_bundle(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_folder_with_too_many_files_is_refused_while_listing(
    make_bundle: MakeBundle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from toolkit.grading import pack

    monkeypatch.setattr(pack, "MAX_MEMBERS", 50)
    bundle = make_bundle(ORACLE, files={f"w/{i:03d}.bin": b"" for i in range(60)})
    with pytest.raises(BundleError, match="more than 50 files and folders"):
        pack_bundle(bundle, tmp_path / "out.tar.gz")


def test_pycache_folders_are_never_packed(make_bundle: MakeBundle, tmp_path: Path) -> None:
    """A promoted bundle ships its sources, not the byte code its imports left (issue 51)."""
    bundle = make_bundle(ORACLE, files={"lib/util.py": b"X = 1\n"})
    clean = pack_bundle(bundle, tmp_path / "clean.tar.gz")
    for folder in (bundle / "__pycache__", bundle / "lib" / "__pycache__"):
        folder.mkdir()
        (folder / "inference.cpython-311.pyc").write_bytes(b"\x00byte code")
    packed = pack_bundle(bundle, tmp_path / "packed.tar.gz")
    with tarfile.open(packed.path) as tar:
        assert not [n for n in tar.getnames() if "__pycache__" in n or n.endswith(".pyc")]
    assert packed.sha256 == clean.sha256 and packed.files == clean.files
