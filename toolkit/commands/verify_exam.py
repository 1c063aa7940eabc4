"""`toolkit verify-exam`: check an exam file against its published hash, and warn when the
manifest beside it describes another file."""

from __future__ import annotations

import re
from pathlib import Path

import click

from exam_builder.exam_file import EXAM_FILE, MANIFEST_FILE, SHORT_HASH, sha256_file
from exam_builder.manifest import ManifestError, load_manifest


@click.command("verify-exam")
@click.argument("exam", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--sha256",
    "expected",
    required=True,
    metavar="HEX",
    help=f"The published exam hash: all 64 hex digits, or a prefix of at least {SHORT_HASH}.",
)
def verify_exam_command(exam: Path, expected: str) -> None:
    """Check that an exam file is the published one: its SHA-256 must match HEX.

    EXAM is an exam.jsonl (or a directory holding one). HEX may be the full hash or a
    published short hash (a prefix of at least 8 hex digits). Exits non-zero on a
    mismatch and shows both hashes.

    \b
    Example:
      toolkit verify-exam /tmp/demo-exam/exam.jsonl --sha256 c23cb953
    """
    path = exam / EXAM_FILE if exam.is_dir() else exam
    want = expected.strip().lower()
    if not re.fullmatch(rf"[0-9a-f]{{{SHORT_HASH},64}}", want):
        raise click.BadParameter(
            f"{expected!r} is not a SHA-256 or a prefix of at least {SHORT_HASH} hex digits",
            param_hint="--sha256",
        )
    try:
        actual = sha256_file(path)
    except OSError as exc:
        raise click.ClickException(f"{path}: cannot read: {exc}") from exc
    if not actual.startswith(want):
        click.echo(f"MISMATCH {path}", err=True)
        click.echo(f"  expected {want}", err=True)
        click.echo(f"  actual   {actual}", err=True)
        raise SystemExit(1)
    kind = "full hash" if len(want) == 64 else f"{len(want)}-digit prefix"
    click.echo(f"OK {path}: sha256 {actual} (matches the {kind})")
    _check_manifest(path.parent / MANIFEST_FILE, actual)


def _check_manifest(path: Path, actual: str) -> None:
    """Warn when the manifest beside the exam describes another file (a stale copy)."""
    if not path.is_file():
        return
    try:
        recorded = load_manifest(path).exam_sha256
    except ManifestError as exc:
        click.echo(f"warning: {exc}", err=True)
        return
    if recorded != actual:
        click.echo(
            f"warning: {path} records exam sha256 {recorded}, not this file's: "
            "the manifest is stale or belongs to another exam",
            err=True,
        )
