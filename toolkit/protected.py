"""What no sandbox may ever see: where exams, banks and the exam engine live on this host.

Every sandbox of a run (controller, runner, grader during public scoring and final grading) and
every `toolkit grade` hides these paths, plus the ones a caller knows of (the exam file and its
folder, the results folder, hidden banks). The list is deliberately wide: a bundle that can read
the exam engine's reference solvers (or a public bank, or git history holding one) can answer
questions without a model, and a bundle that can read `$ARI_HOME` can read built exams.

A hidden folder may contain the sandbox's own root or read-only paths (a workspace under
`$ARI_HOME/runs/`, a virtual environment inside the checkout): those stay visible, nothing else
under the hidden folder does (the sandbox layer mounts them on top of the empty cover).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import exam_builder
import toolkit
from toolkit.paths import state_dir


def checkout_root() -> Path | None:
    """The source checkout the toolkit runs from (a git working tree), if it runs from one."""
    candidate = Path(toolkit.__file__).resolve().parent.parent
    if (candidate / "pyproject.toml").is_file() and (candidate / "exam_builder").is_dir():
        return candidate
    return None


def protected_paths(extra: Iterable[Path] = ()) -> list[Path]:
    """Host paths that must be invisible in every sandbox, absolute and de-duplicated.

    Always: the state folder (`$ARI_HOME`: built exams, prepared data, other runs), the
    installed `exam_builder` and `toolkit` packages (engine, solvers, public banks), and the
    whole source checkout when the toolkit runs from one (its `.git` holds every bank ever
    committed). `extra`: what the caller adds (exam file and folder, results, hidden banks).
    Paths that do not exist are kept out (nothing to hide).
    """
    found = [
        state_dir(),
        Path(exam_builder.__file__).parent,
        Path(toolkit.__file__).parent,
        *([root] if (root := checkout_root()) else []),
        *extra,
    ]
    out: list[Path] = []
    for path in found:
        resolved = Path(path).resolve()
        if (resolved.exists() or resolved.is_symlink()) and resolved not in out:
            out.append(resolved)
    return sorted(out)
