"""Moving a finished run from the machine it ran on into the results folder, as bytes.

A Ray campaign needs no shared filesystem: the task packs the run's result file and artifact
folder into one tar (the artifacts are small: logs, history, candidate archives of at most
16 MB each) and returns it; the driver alone unpacks it into `<results>/<track>/`. The artifact
folder goes in first (under a temporary name, then renamed) and the result file last,
atomically, so a result file always has its artifacts beside it and a driver killed half way
leaves no result, only a temporary folder that the next unpack of that run replaces.

Unpacking trusts nothing in the tar: only regular files and folders under `<run_id>/` plus
`<run_id>.json`, no links, no absolute paths, no `..`; the result is validated as a `RunResult`
before it is written, and a run that already has a result file is not written twice.
"""

from __future__ import annotations

import io
import shutil
import tarfile
from pathlib import Path, PurePosixPath

from pydantic import ValidationError

from toolkit.results.model import ResultsError, RunResult, save_run

MAX_MEMBER_BYTES = 1 << 30


class CollectError(ValueError):
    """A packed run that cannot be accepted; one line."""


def pack_run(results_dir: Path, track: str, run_id: str) -> bytes:
    """`<run_id>.json` and `<run_id>/` of one run, as an uncompressed tar (archives inside
    are gzipped already)."""
    folder = results_dir / track
    result = folder / f"{run_id}.json"
    if not result.is_file():
        raise CollectError(f"{result}: the run left no result file")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        artifacts = folder / run_id
        if artifacts.is_dir():
            tar.add(artifacts, arcname=run_id, recursive=True)
        tar.add(result, arcname=f"{run_id}.json")
    return buffer.getvalue()


def _member_path(name: str, run_id: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        raise CollectError(f"packed run {run_id}: unsafe path {name!r}")
    if path.parts[0] != run_id and name != f"{run_id}.json":
        raise CollectError(f"packed run {run_id}: {name!r} is not part of the run")
    return path


def unpack_run(blob: bytes, results_dir: Path) -> tuple[Path, RunResult, bool]:
    """Write a packed run into `results_dir`; (result path, result, whether it was new)."""
    try:
        with tarfile.open(fileobj=io.BytesIO(blob), mode="r:") as tar:
            return _unpack(tar, results_dir)
    except tarfile.TarError as exc:
        raise CollectError(f"a packed run is not a tar archive: {exc}") from None


def _unpack(tar: tarfile.TarFile, results_dir: Path) -> tuple[Path, RunResult, bool]:
    members = tar.getmembers()
    results = [m for m in members if m.isfile() and "/" not in m.name and m.name.endswith(".json")]
    if len(results) != 1:
        raise CollectError("a packed run must hold exactly one result file")
    run_id = results[0].name.removesuffix(".json")
    raw = tar.extractfile(results[0])
    assert raw is not None
    try:
        result = RunResult.model_validate_json(raw.read())
    except ValidationError as exc:
        raise ResultsError(f"packed run {run_id}: {exc.errors()[0]['msg']}") from None
    if result.run_id != run_id:
        raise CollectError(f"packed run {run_id}: its result says run_id {result.run_id!r}")
    folder = results_dir / result.track
    final = folder / f"{run_id}.json"
    if final.exists():
        return final, result, False
    staging = folder / f".{run_id}.incoming"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for member in members:
        path = _member_path(member.name, run_id)
        if member.name == results[0].name:
            continue
        if not (member.isfile() or member.isdir()):
            raise CollectError(f"packed run {run_id}: {member.name!r} is not a file or folder")
        if member.size > MAX_MEMBER_BYTES:
            raise CollectError(f"packed run {run_id}: {member.name!r} is too large")
        target = staging.joinpath(*path.parts[1:])
        if member.isdir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        source = tar.extractfile(member)
        assert source is not None
        with target.open("wb") as out:
            shutil.copyfileobj(source, out)
    artifacts = folder / run_id
    if artifacts.exists():
        shutil.rmtree(artifacts)  # a half-collected copy from a driver that died
    staging.rename(artifacts)
    return save_run(result, results_dir), result, True
