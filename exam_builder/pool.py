"""The private solver pool: model-free solvers kept beside a hidden bank, never in this repository.

The generic solvers (`exam_builder.solvers`) are public, so a bank author writes families they
cannot read, and an attacker writes rules that the public solvers do not contain. The pool is
the answer: maintainers keep a red-team folder of solvers (rules written from the guide, blind
guessers, readers of a structure that a past bundle exploited...) and grow it after every
review, and the gate runs each of them like a generic solver: at most `GENERIC_LIMIT` percent
per family of a bank that is not public.

Where it lives: `<bank>/solvers/*.py` (left out of the bank hash), and any folder passed to
`prepare_exam`/`build_exam` (`toolkit build-exam --pool DIR`, which may be given several times),
so one pool serves several banks. Nothing of it is published: the manifest stores the pool's
size and each family's best pool score, not the solvers' names or code.

The interface (one Python file per solver or group of solvers):

    from exam_builder.solvers.base import Solver
    from exam_builder.solvers.text import Prompt

    def guess(prompt: Prompt) -> str | None:
        ...  # read prompt.context (the grader's last 1,024 bytes); None when unsure

    SOLVER = Solver("two-hop", "relation walks through a value seen once", guess)
    # or SOLVERS = [Solver(...), ...]

A guess is graded as the grader grades a bundle: right when it starts with the answer; it is
cut at a mask and at `MAX_GUESS_CHARS`. A guess that raises `ValueError`, `IndexError`,
`KeyError`, `ZeroDivisionError` or `OverflowError` counts as no guess; any other exception
is a bug of the pool and stops the build with one line naming the file.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from exam_builder.bank import POOL_DIR, BankError, load_file_module
from exam_builder.solvers.base import Solver

__all__ = ["POOL_DIR", "load_pool", "pool_dirs"]


def pool_dirs(bank_dir: Path, extra: Iterable[Path] = ()) -> list[Path]:
    """The pool folders of a build: the bank's own `solvers/` (when present), then `extra`."""
    own = bank_dir / POOL_DIR
    return ([own] if own.is_dir() else []) + list(extra)


def _load_file(path: Path) -> list[Solver]:
    module = load_file_module(path, "_ari_pool_solver_", "pool solver")
    found = getattr(module, "SOLVERS", None)
    if found is None and hasattr(module, "SOLVER"):
        found = [module.SOLVER]
    if not isinstance(found, list | tuple) or not found:
        raise BankError(
            f"{path}: define SOLVER = Solver(name, structure, guess) or a non-empty SOLVERS list "
            "(exam_builder.solvers.base.Solver); see exam_builder.pool"
        )
    bad = [s for s in found if not isinstance(s, Solver) or not callable(s.guess)]
    if bad:
        raise BankError(f"{path}: SOLVER(S): {bad[0]!r} is not an exam_builder Solver")
    return list(found)


def load_pool(dirs: Iterable[Path]) -> dict[str, Solver]:
    """Every solver of the pool folders, by name (`BankError`, one line, for a bad file)."""
    pool: dict[str, Solver] = {}
    for folder in dirs:
        if not folder.is_dir():
            raise BankError(f"{folder}: not a folder; a solver pool is a folder of *.py files")
        for path in sorted(folder.glob("*.py")):
            for solver in _load_file(path):
                if solver.name in pool:
                    raise BankError(f"{path}: solver name {solver.name!r} is used twice")
                pool[solver.name] = solver
    return pool
