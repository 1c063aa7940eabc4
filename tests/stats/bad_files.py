"""One bad file in an otherwise good results folder, each kind (issue 50 item 3; test data).

Each attack writes its file into a folder holding two good runs and says which file it is
(by a piece of its path) and which words its refusal must hold. Shared by the statistics
tests (loader, `leaderboard`, `runs validate`) and the site tests (both builds).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from results_factory import run_dict, track_dict, write_registry, write_run

from toolkit.results.signing import KEYRING_FILE


def good_folder(root: Path) -> Path:
    """Two good, signed runs of one track."""
    results = root / "results"
    write_registry(results, [track_dict()])
    write_run(results, run_dict("good0", model="alpha"))
    write_run(results, run_dict("good1", model="alpha", seed=1, passed=60))
    return results


def _nul_path(results: Path) -> tuple[str, str]:
    run = run_dict("bad0", model="beta")
    run["artifacts"] = {"transcript": "bad0/tran\x00script.txt"}
    write_run(results, run)
    return "bad0.json", "artifacts"


def _deep_json(results: Path) -> tuple[str, str]:
    depth = 100_000
    (results / "v1-test" / "bad0.json").write_text("[" * depth + "]" * depth)
    return "bad0.json", "nested deeper"


def _sparse_transcript(results: Path) -> tuple[str, str]:
    run = run_dict("bad0", model="beta")
    folder = results / "v1-test" / "bad0"
    folder.mkdir(parents=True)
    with (folder / "transcript.txt").open("wb") as f:
        f.truncate(6 * 1024**3)  # sparse: 6 GiB of nothing on disk
    run["artifacts"] = {"transcript": "bad0/transcript.txt"}
    write_run(results, run)
    return "bad0.json", "bytes"


def _keyring_fifo(results: Path) -> tuple[str, str]:
    (results / KEYRING_FILE).unlink()
    os.mkfifo(results / KEYRING_FILE)
    return KEYRING_FILE, "not a plain file"


def _keyring_link_out(results: Path) -> tuple[str, str]:
    outside = results.parent / "outside-keys.json"
    outside.write_text((results / KEYRING_FILE).read_text())
    (results / KEYRING_FILE).unlink()
    (results / KEYRING_FILE).symlink_to(outside)
    return KEYRING_FILE, "symlink"


def _keyring_dev_zero(results: Path) -> tuple[str, str]:
    (results / KEYRING_FILE).unlink()
    (results / KEYRING_FILE).symlink_to("/dev/zero")
    return KEYRING_FILE, "symlink"


def _keyring_huge(results: Path) -> tuple[str, str]:
    with (results / KEYRING_FILE).open("r+b") as f:
        f.truncate(2 * 1024**3)
    return KEYRING_FILE, "bytes"


def _deep_audit_line(results: Path) -> tuple[str, str]:
    """Not refused: a log line nested 100,000 deep is shown as an unreadable line."""
    write_run(results, run_dict("odd0", model="beta"), artifacts={"audit": "[" * 100_000 + "\n"})
    return "", ""


ATTACKS: dict[str, Callable[[Path], tuple[str, str]]] = {
    "NUL in an artifact path": _nul_path,
    "JSON nested 100,000 deep": _deep_json,
    "a sparse 6 GiB transcript": _sparse_transcript,
    "signing_keys.json a FIFO": _keyring_fifo,
    "signing_keys.json a link out": _keyring_link_out,
    "signing_keys.json a link to /dev/zero": _keyring_dev_zero,
    "signing_keys.json of 2 GiB": _keyring_huge,
}
"""Attacks whose file is refused, each with its reason (the rest of the folder loads)."""

SHOWN = {"an audit line nested 100,000 deep": _deep_audit_line}
"""Attacks that are shown, not refused (the site must still build)."""


def long_model(results: Path) -> str:
    """A run whose model name is 300 characters (its row page is a file)."""
    model = "m" * 150 + "-" + "n" * 149
    write_run(results, run_dict("long0", model=model))
    return model


def index_track(results: Path) -> None:
    """A registry whose track is named like the overview page."""
    write_registry(results, [track_dict(), track_dict("index")])
