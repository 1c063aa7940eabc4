"""What every grading sandbox hides, whoever asks for the grading.

Public scoring during a run, final grading (both phases) and `toolkit grade` all go through
`PhaseWorker`, which hides `grading_hidden(...)`: the exam file and its folder, the paths no
sandbox may see (`toolkit.protected`: the state folder with its built exams, the exam engine
with its solvers and public banks, the toolkit, the source checkout with its history), the
grading's own work folder (other phases, the archive), and whatever the caller adds (the run's
real exam during public scoring, hidden banks, results).

A hidden folder may hold a path the worker needs: its own sandbox root (`toolkit grade --keep`
inside the checkout) or the interpreter (a virtual environment inside the checkout). The local
backend takes such folders whole (it covers them and mounts the kept paths on top, so not even
the names of the other entries show); for other backends `cover` hides everything in that
folder except the way down to what is kept, entry by entry, so that the sandbox never has to
expose something from under a hidden folder. Entries that appear
in such a folder after the worker has started are not covered (the worker sees the folder as it
was listed): the folders concerned are the host's own (checkout, state folder, work folder),
which the bundle cannot write to.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from toolkit.protected import protected_paths


def grading_hidden(exam_file: Path, work: Path, extra: Iterable[Path] = ()) -> list[Path]:
    """Absolute paths a grading worker must not see (see the module docstring)."""
    exam_file = exam_file.absolute()
    folder = exam_file.parent
    exam_paths = [exam_file] + ([folder] if folder != Path(folder.anchor) else [])
    return protected_paths([*exam_paths, work, *extra])


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def cover(hidden: Sequence[Path], keep: Sequence[Path]) -> list[Path]:
    """Paths to hide so that every `hidden` path is invisible except the `keep` paths in it.

    A hidden path that is itself kept, or lies inside a kept one, is hidden as is when it lies
    inside (the sandbox mounts the kept path first, then covers the hidden one) and not at all
    when it is kept itself. Symbolic links inside a split folder are left alone: hiding one
    would hide its target, which is not ours to hide.
    """
    keep = [Path(k).resolve() for k in keep]
    out: list[Path] = []
    for path in (Path(os.path.abspath(h)) for h in hidden):
        _cover_one(path, keep, out)
    return sorted(set(out))


def _cover_one(path: Path, keep: list[Path], out: list[Path]) -> None:
    if path in keep:
        return
    inside = [k for k in keep if _within(k, path)]
    if not inside:
        out.append(path)
        return
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return  # unlistable even by the host: nothing in it for the worker to see either
    for name in names:
        entry = path / name
        if entry.is_symlink():
            continue
        _cover_one(entry, keep, out)
