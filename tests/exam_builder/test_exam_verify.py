"""`toolkit verify-exam`: the full hash and an 8-digit prefix pass; one changed byte fails."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from exam_helpers import DEMO

from exam_builder.build import build_exam
from toolkit.cli import cli


@pytest.fixture(scope="module")
def exam(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("verify") / "exam"
    manifest = build_exam(DEMO, out, english_text=None)
    return out / "exam.jsonl", manifest.exam_sha256


def _verify(path: Path, digest: str) -> Result:
    return CliRunner().invoke(cli, ["verify-exam", str(path), "--sha256", digest])


def test_full_hash_passes(exam: tuple[Path, str]) -> None:
    path, digest = exam
    result = _verify(path, digest)
    assert result.exit_code == 0, result.output
    assert "OK" in result.output


def test_short_prefix_passes_and_directory_is_accepted(exam: tuple[Path, str]) -> None:
    path, digest = exam
    assert _verify(path, digest[:8]).exit_code == 0
    assert _verify(path.parent, digest[:8].upper()).exit_code == 0


def test_one_changed_byte_fails_showing_both_hashes(exam: tuple[Path, str], tmp_path: Path) -> None:
    path, digest = exam
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    changed = tmp_path / "exam.jsonl"
    changed.write_bytes(bytes(data))
    for given in (digest, digest[:8]):
        result = _verify(changed, given)
        assert result.exit_code == 1
        assert given in result.output
        assert "actual" in result.output and "expected" in result.output


@pytest.mark.parametrize("bad", ["abc1234", "not-a-hash", "g" * 64, "a" * 65])
def test_too_short_or_not_hex_is_a_usage_error(exam: tuple[Path, str], bad: str) -> None:
    result = _verify(exam[0], bad)
    assert result.exit_code == 2
    assert "--sha256" in result.output


def test_stale_manifest_beside_the_exam_is_reported(exam: tuple[Path, str], tmp_path: Path) -> None:
    path, digest = exam
    copy = tmp_path / "exam.jsonl"
    copy.write_bytes(path.read_bytes())
    manifest = (path.parent / "manifest.json").read_text(encoding="utf-8")
    (tmp_path / "manifest.json").write_text(manifest.replace(digest, "0" * 64), encoding="utf-8")
    result = _verify(copy, digest[:8])
    assert result.exit_code == 0  # the file is the published one; the manifest is what is off
    assert "manifest is stale" in result.output
    assert "stale" not in _verify(path, digest).output
