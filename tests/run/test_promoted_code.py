"""`promoted-code.txt`: the promoted bundle's files but its weights, published with the run so
a reviewer can read what scored (issue 28: the weights ablation misses rules kept outside
Python files; reading the code does not)."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

from toolkit.run.artifacts import (
    PROMOTED_CODE,
    TEXT_FILE_CAP,
    list_artifacts,
    write_promoted_code,
)

RULES = "import re\nANSWERS = {'Beads now held by': 'count'}\n"
INFERENCE = "exec(open('rules.txt').read())  # rules kept outside a .py file\n"
WEIGHTS = bytes(range(256)) * 64  # binary, with NUL bytes


def _archive(tmp_path: Path) -> Path:
    out = tmp_path / "cand.tar.gz"
    with tarfile.open(out, "w:gz") as tar:

        def add(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))

        add("inference.py", INFERENCE.encode())
        add("rules.txt", RULES.encode())
        add("model.bin", WEIGHTS)
        add("big.txt", b"x" * (TEXT_FILE_CAP + 10))
        add("odd\x1bname.txt", b"hello\n")
        link = tarfile.TarInfo("link.txt")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    return out


def test_text_is_shown_binary_listed_links_skipped(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    path = write_promoted_code(_archive(tmp_path), folder, "cand-0003")
    text = path.read_text(encoding="utf-8")
    assert path.name == PROMOTED_CODE and "Candidate cand-0003" in text
    assert INFERENCE.strip() in text and RULES.strip() in text  # the rules are readable
    sha = hashlib.sha256(WEIGHTS).hexdigest()
    assert f"== model.bin ({len(WEIGHTS):,} bytes, sha256 {sha}): not shown" in text
    assert "big.txt" in text and "x" * 1000 not in text  # over the cap: listed only
    assert "odd?name.txt" in text and "\x1b" not in text  # the agent's names, printable
    assert "link.txt" not in text and "root:" not in text  # links are never followed
    assert list_artifacts(folder, "r1")["promoted_code"] == f"r1/{PROMOTED_CODE}"
