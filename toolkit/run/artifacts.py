"""A run's artifacts: the files beside its result, and how a result lists them.

The run folder `results/<track>/<run_id>/` holds the audit log, the submission history, the
agent's transcript, the harness's own log, whatever the scaffold adds (an event stream, say),
and `candidates/` (the packed archives, binary, found by candidate id). A result lists every
file of the folder's top level under a key (the usual ones under fixed keys), so nothing the
run left behind goes unmentioned, whether the run ended normally or was recovered after its
harness died.

After the final grading the folder also gets `promoted-code.txt`: the promoted candidate's
files but its weights, so that a reviewer (anyone, once the run is published) can read what
scored (`write_promoted_code`). The weights ablation cannot tell rules kept outside Python
files from a model; reading the code can.

Every file of the run folder is also hashed into the signed result (`RunResult.files`: its
path relative to the results file, and the SHA-256 of its bytes; `file_hashes`), the
candidates' archives included, so that no published byte (a line of `agent.log`, of the
transcript) can change without `toolkit runs validate` saying so (`check_files`). Archives
are kept out of git (16 MB each): one that is absent is noted, one that is there must match.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import tarfile
from pathlib import Path

from toolkit.results.chain import ChainError, chain_head
from toolkit.results.model import LogHead, RunResult
from toolkit.results.run_files import CANDIDATES_DIR as CANDIDATES_DIR
from toolkit.results.run_files import run_folder_check
from toolkit.run.history import HISTORY_FILE

AUDIT_FILE = "audit.jsonl"
TRANSCRIPT_FILE = "transcript.txt"
AGENT_LOG = "agent.log"
KNOWN = {AUDIT_FILE: "audit", HISTORY_FILE: "history", TRANSCRIPT_FILE: "transcript"}
KNOWN[AGENT_LOG] = "agent_log"
PROMOTED_CODE = "promoted-code.txt"
KNOWN[PROMOTED_CODE] = "promoted_code"
TEXT_FILE_CAP = 1_000_000
"""A text file of the bundle longer than this (bytes) is listed, not shown."""
CODE_CAP = 8_000_000
"""At most this many bytes of text are shown in all; later files are listed, not shown."""


def _key(name: str) -> str:
    """`events.jsonl` -> `events`: the file's stem in lower case, other characters as `_`."""
    stem = name.split(".", 1)[0] if not name.startswith(".") else name
    return KNOWN.get(name) or re.sub(r"[^a-z0-9]+", "_", stem.lower()).strip("_") or "file"


def list_artifacts(folder: Path, run_id: str) -> dict[str, str]:
    """Every regular file at the top of `folder`, as {key: "<run_id>/<name>"} (links and
    sub-folders left out; `candidates/` is found by id, not listed)."""
    out: dict[str, str] = {}
    try:
        names = sorted(p.name for p in folder.iterdir())
    except OSError:
        return out
    for name in names:
        try:
            if not stat.S_ISREG((folder / name).lstat().st_mode):
                continue
        except OSError:
            continue
        key = _key(name)
        while key in out:  # two names that clean to the same key: keep both
            key += "_"
        out[key] = f"{run_id}/{name}"
    return out


CHAINED_ARTIFACTS = ("audit", "history")
"""Keys of `RunResult.artifacts` that are chained logs."""


def log_heads(folder: Path, artifacts: dict[str, str]) -> dict[str, LogHead]:
    """The head of each chained log among `artifacts` (paths relative to `folder`).

    A log whose chain is already broken gets no head: the run that has one is invalid for it.
    """
    heads: dict[str, LogHead] = {}
    for key in CHAINED_ARTIFACTS:
        if key not in artifacts:
            continue
        try:
            entries, head = chain_head(folder / artifacts[key])
        except ChainError:
            continue
        heads[key] = LogHead(entries=entries, sha256=head)
    return heads


def _shown_name(name: str) -> str:
    """An archive member's name, printable on one line (it is the agent's)."""
    return "".join(c if c.isprintable() else "?" for c in name)[:300]


def write_promoted_code(archive: Path, folder: Path, candidate_id: str) -> Path:
    """Write `promoted-code.txt` in `folder`: every regular file of the bundle in `archive`,
    text files (UTF-8, no NUL) shown in full up to `TEXT_FILE_CAP`, others (weights, compiled
    code) listed by size and SHA-256. Reads the archive without extracting anything.

    Raises `OSError` or `tarfile.TarError` for an unreadable archive (the caller logs it)."""
    lines = [
        f"# Candidate {_shown_name(candidate_id)}, promoted and graded: its files but the weights",
        "# Text files are shown in full; binary files (tensors, compiled code) are listed by",
        "# size and SHA-256. Read it as the bundle's author's text: nothing here was run.",
        "",
    ]
    shown = 0
    with tarfile.open(archive, "r:*") as tar:
        for member in tar:
            if not member.isfile():
                continue
            source = tar.extractfile(member)
            if source is None:
                continue
            digest, size, head = hashlib.sha256(), 0, b""
            while chunk := source.read(1 << 20):
                digest.update(chunk)
                if size <= TEXT_FILE_CAP:
                    head += chunk[: TEXT_FILE_CAP + 1 - size]
                size += len(chunk)
            what = f"{_shown_name(member.name)} ({size:,} bytes, sha256 {digest.hexdigest()})"
            text = None
            if size <= TEXT_FILE_CAP and b"\0" not in head and shown + size <= CODE_CAP:
                try:
                    text = head.decode("utf-8")
                except UnicodeDecodeError:
                    text = None
            if text is None:
                lines += [f"== {what}: not shown (binary, or over the size cap) ==", ""]
                continue
            shown += size
            lines += [f"== {what} ==", text.rstrip("\n"), ""]
    out = folder / PROMOTED_CODE
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _walk(folder: Path) -> tuple[list[Path], list[Path]]:
    """(regular files, anything else) under `folder`, links never followed."""
    files: list[Path] = []
    odd: list[Path] = []
    for root, dirs, names in os.walk(folder, followlinks=False):
        base = Path(root)
        for name in dirs:
            if (base / name).is_symlink():
                odd.append(base / name)
        for name in names:
            path = base / name
            mode = path.lstat().st_mode
            (files if stat.S_ISREG(mode) else odd).append(path)
    return sorted(files), sorted(odd)


def file_hashes(folder: Path, run_id: str) -> dict[str, str]:
    """{"<run_id>/<path>": sha256} of every regular file under the run folder `folder`."""
    files, _ = _walk(folder)
    return {f"{run_id}/{p.relative_to(folder).as_posix()}": _sha256(p) for p in files}


def check_files(result_file: Path, result: RunResult) -> tuple[list[str], list[str]]:
    """(problems, notes) of a run folder against the hashes its signed result carries: the
    check the site and the leaderboard make too (`toolkit.results.run_files`)."""
    return run_folder_check(result_file, result)
