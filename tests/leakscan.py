"""Leak scan: does published text hold any piece of a hidden exam?

`Secrets` are the exam's prompts, answers, and each prompt followed by its answer (phase 2's
contexts cross that boundary), plus any canaries a test adds. A leak is any run of `WINDOW`
bytes of a secret found in the scanned text. Before comparing, whitespace is dropped on both
sides (a console wraps long lines, a log folds them), and each file is scanned as it is on
disk, as the strings of its JSON (escapes undone) and as HTML-unescaped text, so a secret
does not escape the scan by being quoted.

    secrets = Secrets.of_exam(exam_file, canaries=["CANARY-1234"])
    assert secrets.scan_tree(results_dir) == []
    assert secrets.scan_text(stdout) == []
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

WINDOW = 12
"""The shortest run of secret bytes that counts as a leak."""
_SPACE = re.compile(rb"\s+")


def _squeeze(data: bytes) -> bytes:
    return _SPACE.sub(b"", data)


def _strings(value: object) -> Iterator[str]:
    """Every string in a JSON value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _views(data: bytes) -> Iterator[bytes]:
    """`data` as it is, as the strings of its JSON (or JSON lines), and HTML-unescaped."""
    yield data
    text = data.decode("utf-8", "replace")
    docs: list[object] = []
    try:
        docs = [json.loads(text)]
    except ValueError:
        for line in text.splitlines():
            try:
                docs.append(json.loads(line))
            except ValueError:
                continue
    if docs:
        yield "\n".join(s for doc in docs for s in _strings(doc)).encode("utf-8", "replace")
    unescaped = html.unescape(text)
    if unescaped != text:
        yield unescaped.encode("utf-8", "replace")


@dataclass(frozen=True)
class Leak:
    """Where a piece of a secret was found."""

    where: str
    piece: bytes

    def __str__(self) -> str:
        return f"{self.where}: {self.piece!r}"


class Secrets:
    """The pieces of secret text a scan looks for."""

    def __init__(self, texts: Iterable[bytes]) -> None:
        self.windows: set[bytes] = set()
        for text in texts:
            squeezed = _squeeze(text)
            for start in range(len(squeezed) - WINDOW + 1):
                self.windows.add(squeezed[start : start + WINDOW])
        if not self.windows:
            raise ValueError(f"no secret is {WINDOW} bytes long: the scan would find nothing")

    @classmethod
    def of_exam(cls, exam_file: Path, canaries: Iterable[str] = ()) -> Secrets:
        """The prompts and answers of an exam.jsonl, prompt + answer, and `canaries`."""
        texts: list[bytes] = [c.encode() for c in canaries]
        for line in exam_file.read_text(encoding="utf-8").splitlines():
            question = json.loads(line)
            prompt, answer = question["prompt"].encode(), question["answer"].encode()
            texts += [prompt, answer, prompt + answer]
        return cls(texts)

    def scan_bytes(self, data: bytes, where: str = "text") -> list[Leak]:
        """The first leak in each view of `data` (empty: none)."""
        leaks: list[Leak] = []
        for view in _views(data):
            squeezed = _squeeze(view)
            for start in range(len(squeezed) - WINDOW + 1):
                piece = squeezed[start : start + WINDOW]
                if piece in self.windows:
                    leaks.append(Leak(where, piece))
                    break
        return leaks

    def scan_text(self, text: str, where: str = "text") -> list[Leak]:
        return self.scan_bytes(text.encode("utf-8", "replace"), where)

    def scan_tree(self, root: Path) -> list[Leak]:
        """Leaks in every file under `root` (names included), archives read as they are."""
        leaks: list[Leak] = []
        for path in sorted(root.rglob("*")):
            rel = str(path.relative_to(root))
            leaks += self.scan_text(rel, f"{rel} (its name)")
            if path.is_file() and not path.is_symlink():
                leaks += self.scan_bytes(path.read_bytes(), rel)
        return leaks
