"""JSON from a results folder, parsed with its nesting bounded.

Python's parser recurses once per level: a file of 100,000 `[` raises `RecursionError`
(or worse, in code that catches only `ValueError`), which would stop every reader of the
folder, not just refuse the file. `loads` measures the nesting first, without recursing, and
refuses a document deeper than `MAX_DEPTH` with `json.JSONDecodeError` (a `ValueError`), the
error every reader already turns into a line naming the file. No file the toolkit writes
comes near the bound (a result file nests 4 deep).
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DEPTH = 64
"""The deepest nesting of arrays and objects accepted."""

# A string (skipped whole: brackets inside it are text) or a bracket.
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)
_OPEN = frozenset(b"[{")


def check_depth(data: bytes | str, max_depth: int = MAX_DEPTH) -> None:
    """Raise `json.JSONDecodeError` when `data` nests deeper than `max_depth`."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if raw.count(b"[") + raw.count(b"{") <= max_depth:
        return  # too few brackets to be too deep: the common case costs two counts
    depth = 0
    for match in _TOKEN.finditer(raw):
        first = match.group()[0]
        if first in _OPEN:
            depth += 1
            if depth > max_depth:
                text = raw.decode("utf-8", "replace")
                raise json.JSONDecodeError(
                    f"nested deeper than {max_depth} levels", text, match.start()
                )
        elif first != 0x22:  # a closing bracket ('"' starts a string)
            depth = max(depth - 1, 0)


def loads(data: bytes | str, **kwargs: Any) -> Any:
    """`json.loads(data)` once `check_depth` has passed."""
    check_depth(data)
    return json.loads(data, **kwargs)
