"""Options that several commands share, as decorators (one definition, one behaviour)."""

from __future__ import annotations

import os
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


def _host_cpus(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    cores = os.cpu_count() or 1
    if value is not None and value > cores:
        raise click.BadParameter(f"{value:g} cores asked, this host has {cores}")
    return value


def cpus_option(what: str) -> Callable[[F], F]:
    """`--cpus N`: a CPU quota, in cores, for the sandboxes that run model code."""
    return click.option(
        "--cpus",
        type=click.FloatRange(min=0.01),
        default=None,
        callback=_host_cpus,
        help=f"CPU quota of {what}, in cores (e.g. 8 or 2.5; enforced by the kernel, recorded); "
        "default: none, the host's cores are shared.",
    )


def keys_option() -> Callable[[F], F]:
    """`--keys FILE`: a key list to pin, beside the toolkit's pinned keys."""
    return click.option(
        "--keys",
        "keys_file",
        type=click.Path(dir_okay=False, exists=True, path_type=Path),
        default=None,
        help="A key list (signing_keys.json format) whose keys you pin, beside the toolkit's "
        "pinned_keys.json, $ARI_TRUSTED_KEYS and this machine's key. The results folder's own "
        "signing_keys.json is never trusted: a key only it lists is reported as untrusted.",
    )


def _device(ctx: click.Context, param: click.Parameter, value: str) -> str:
    if value == "auto":
        from toolkit.run.roles import detect_device  # the run package: only when asked

        return detect_device()
    head, colon, index = value.partition(":")
    if not (value == "cpu" or (head == "cuda" and (not colon or index.isdigit()))):
        raise click.BadParameter(f"{value!r}: want auto, cpu, cuda or cuda:N")
    return value


def device_option(help: str) -> Callable[[F], F]:
    """`--device auto|cpu|cuda|cuda:N`, resolved: auto is the GPU when CUDA can use one."""
    return click.option(
        "--device",
        default="auto",
        show_default=True,
        callback=_device,
        help=f"{help} auto: cuda when this host's torch can use a GPU, else cpu; cuda:N pins "
        "GPU N.",
    )
