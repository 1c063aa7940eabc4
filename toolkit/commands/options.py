"""Options that several commands share, as decorators (one definition, one behaviour)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def results_dir_option(help: str) -> Callable[[F], F]:
    """`--results DIR`: the results folder (registry + per-run files), env `ARI_RESULTS_DIR`."""
    return click.option(
        "--results",
        "results_dir",
        type=click.Path(file_okay=False, path_type=Path),
        default=Path("results"),
        show_default=True,
        envvar="ARI_RESULTS_DIR",
        help=f"{help} (env ARI_RESULTS_DIR).",
    )
