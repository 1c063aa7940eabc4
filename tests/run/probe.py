"""A probe that reports what its process can see where exams might be, in a few hundred bytes.

The same source runs as a script through `runner` and as a bundle's `inference.py` (its `load()`
raises with the report, the one text of a bundle that reaches the agent). For each location it
lists the names it finds (a few levels deep), leaving out its own folders, the way to them, and
the interpreter's, and says whether any file it could read looks like an exam (JSON lines with
`"prompt":` and `"answer":`). The report holds per location: index, count, a hash of the names,
exam-like or not: `PROBE[0:3:1a2b3c:0 1:0:-:0 ...]END`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

SOURCE = r"""
import hashlib, json, os, sys

LOCATIONS = json.loads(__LOCATIONS__)


def _examlike(path):
    try:
        with open(path, "rb") as f:
            data = f.read(1 << 22)
    except OSError:
        return False
    return b'"answer":' in data and b'"prompt":' in data


def _view(loc, own):
    names, found = [], False
    if not os.path.lexists(loc):
        return names, found
    top = os.path.realpath(loc)
    if not os.path.isdir(top):
        return ["."], os.path.isfile(top) and _examlike(top)
    stack = [(top, 0)]
    while stack and len(names) < 2000:
        folder, depth = stack.pop()
        try:
            entries = sorted(os.listdir(folder), reverse=True)
        except OSError:
            continue
        for entry in entries:
            path = os.path.join(folder, entry)
            real = os.path.realpath(path)
            is_dir = os.path.isdir(path) and not os.path.islink(path)
            if any(real == o or o.startswith(real + "/") for o in own):
                if real not in own and is_dir:
                    stack.append((path, depth + 1))  # on the way to our own folder
                continue
            if any(real.startswith(o + "/") for o in own):
                continue
            names.append(os.path.relpath(path, top))
            if is_dir and depth < 3:
                stack.append((path, depth + 1))
            elif os.path.isfile(path) and not os.path.islink(path):
                found = found or _examlike(path)
    return sorted(names), found


def probe(*own_extra):
    own = {os.path.realpath(p) for p in (os.getcwd(), sys.prefix, sys.base_prefix, *own_extra)}
    parts = []
    for i, loc in enumerate(LOCATIONS):
        names, found = _view(loc, own)
        digest = hashlib.sha256("\n".join(names).encode()).hexdigest()[:6] if names else "-"
        parts.append(f"{i}:{len(names)}:{digest}:{int(found)}")
    return "PROBE[" + " ".join(parts) + "]END"


def load(bundle_dir, device):
    raise RuntimeError(probe(bundle_dir, os.path.dirname(os.path.abspath(__file__))))


if __name__ == "__main__":
    print(probe(os.path.dirname(os.path.abspath(__file__))))
"""

_REPORT = re.compile(r"PROBE\[([^\]]*)\]END")


def source(locations: list[str]) -> str:
    """The probe for these locations (the same file serves as script and as inference.py)."""
    return SOURCE.replace("__LOCATIONS__", repr(json.dumps(locations)))


@dataclass(frozen=True)
class Seen:
    count: int
    names_hash: str
    examlike: bool


def parse(text: str) -> list[Seen] | None:
    """The last report in `text` (None if there is none, e.g. it was cut short)."""
    found = _REPORT.findall(text)
    if not found:
        return None
    out = []
    for part in found[-1].split():
        _i, count, names_hash, examlike = part.split(":")
        out.append(Seen(int(count), names_hash, examlike == "1"))
    return out


def not_a_subset(public: list[Seen], runner: list[Seen], locations: list[str]) -> list[str]:
    """Locations where `public` saw something that `runner` did not (names differ)."""
    return [
        f"{loc}: public scoring saw {p.count} names ({p.names_hash}), the runner {r.count} "
        f"({r.names_hash})"
        for loc, p, r in zip(locations, public, runner, strict=True)
        if p.count and (p.count, p.names_hash) != (r.count, r.names_hash)
    ]
