"""The mount table of the calling process's mount namespace, read from /proc/self/mountinfo.

Shared by both backends: the local launcher reads it inside a tree's namespace to detach and
cover mounts (`local/mounts.py`), and `capped.py` reads it on the host to find capped folders
(for either backend). Stdlib only, and no package imports: the local launcher loads it by path
when it runs as a script with `-I -S`.
"""

from __future__ import annotations


def mountinfo() -> list[tuple[str, str, str]]:
    """(mount point, filesystem type, source) of each mount of this namespace, unescaped
    (mountinfo writes spaces as \\040)."""
    with open("/proc/self/mountinfo", "rb") as f:
        lines = f.read().splitlines()
    found = []
    for line in lines:
        fields = line.split(b" ")
        after = fields.index(b"-")
        point = _unescape(fields[4])
        found.append((point, fields[after + 1].decode(), fields[after + 2].decode()))
    return found


def _unescape(raw: bytes) -> str:
    """Undo mountinfo's octal escapes (\\040 for a space). By hand: the `unicode_escape`
    codec would be imported in every sandboxed tree (about a millisecond each)."""
    if b"\\" not in raw:
        return raw.decode()
    out = bytearray()
    index = 0
    while index < len(raw):
        code = raw[index + 1 : index + 4]
        if raw[index] == ord("\\") and len(code) == 3 and code.isdigit():
            out.append(int(code, 8))
            index += 4
        else:
            out.append(raw[index])
            index += 1
    return out.decode()
