"""Where the toolkit keeps its state (prepared corpora, caches).

`ARI_HOME` moves it; tests point it at a temporary directory so that they never touch a user's
home. Nothing here is secret: hidden banks and exams live wherever the operator keeps them.
"""

from __future__ import annotations

import os
from pathlib import Path


def state_dir() -> Path:
    """The toolkit's state directory (`$ARI_HOME`, default `~/.cache/ari-bench`), created."""
    root = os.environ.get("ARI_HOME")
    # Absolute, always: sandboxes get these paths (PATH entries, mounts) from another cwd.
    path = Path(root).expanduser().resolve() if root else Path.home() / ".cache" / "ari-bench"
    path.mkdir(parents=True, exist_ok=True)
    return path


def state_relative(path: Path) -> str:
    """`path` as a published log writes it: under the state folder, `$ARI_HOME/...` (where the
    operator keeps it is the operator's business, never the visitor's); elsewhere its name."""
    try:
        return "$ARI_HOME/" + path.resolve().relative_to(state_dir()).as_posix()
    except ValueError:
        return f"<outside $ARI_HOME>/{path.name}"
