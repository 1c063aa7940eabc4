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


def registry_option() -> Callable[[F], F]:
    """`--registry DIR`: the folder holding tracks.json, when it is not the results folder."""
    return click.option(
        "--registry",
        type=click.Path(file_okay=False, exists=True, path_type=Path),
        default=None,
        help="Folder with tracks.json if not the results folder "
        "(default: --results, then ./results, then the checkout's).",
    )


def find_registry(results_dir: Path, registry: Path | None) -> Path:
    """Where tracks.json is: --registry, else the results folder if it has one, else
    ./results, else the registry of the checkout this toolkit runs from (the results folder
    when none has one)."""
    candidates = [results_dir, Path("results"), Path(__file__).resolve().parents[2] / "results"]
    return registry or next((c for c in candidates if (c / "tracks.json").is_file()), results_dir)
