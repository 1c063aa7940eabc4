"""`toolkit images build` / `toolkit images list`, and the `--images FILE` option of run/grade.

A docker run uses three images (controller, runner, proxy; the grader runs the runner image).
`--images FILE` pins them by digest: a run or a grading refuses to start, with one line, when
an image on this engine is not the pinned one.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from toolkit.commands.console import make_console
from toolkit.images import ROLES, ImageError, ImageSet, current, load_pins, pin
from toolkit.images.resolve import Resolved, resolve
from toolkit.sandbox import SandboxError

F = TypeVar("F", bound=Callable[..., Any])


def images_option(function: F) -> F:
    """`--images FILE`: the pins file of a docker run (role -> name@sha256:...)."""
    return click.option(
        "--images",
        "images_file",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        default=None,
        help="Docker backend: pin the images by digest (JSON: role -> name@sha256:...; "
        "`toolkit images build` writes one). A mismatch refuses to start.",
    )(function)


def use_docker_images(images_file: Path | None) -> dict[str, Resolved]:
    """Check the engine and the images of a docker run; pin them for this process.

    Returns each role's image as the engine has it (grader = runner). Raises
    click.ClickException with one line when there is no engine or an image is wrong.
    """
    from toolkit.sandbox.docker.engine import connect

    try:
        client = connect()
        images = load_pins(images_file) if images_file is not None else current()
        found = {role: resolve(client, images.ref(role), role) for role in ROLES}
    except (ImageError, SandboxError) as exc:
        raise click.ClickException(str(exc)) from exc
    # From here on by exact image (a registry digest, else the image id, both of which the
    # engine resolves as they are): a tag rebuilt or moved during the run changes nothing.
    exact = {role: (found[role].repo_digests or (found[role].id,))[0] for role in ROLES}
    pin(ImageSet(**exact))
    found["grader"] = found["runner"]
    return found


def run_image_digests(backend: str, images_file: Path | None) -> dict[str, str] | None:
    """The digest of each role's image for a run on `backend` (None off docker), checked and
    pinned (`use_docker_images`); `--images` without docker is a usage error."""
    if backend == "docker":
        found = use_docker_images(images_file)
        return {role: found[role].digest for role in ("controller", "runner", "grader")}
    if images_file is not None:
        raise click.UsageError("--images pins Docker images: use it with --backend docker")
    return None


@click.group("images")
def images_group() -> None:
    """Build and list the Docker images of the docker backend (controller, runner, proxy).

    \b
    Example:
      toolkit images build --torch cuda --pins images.json
    """


@images_group.command("build")
@click.option(
    "--base-image",
    default=None,
    help="Debian 12 base image to build on [default: debian:bookworm-slim, from a registry].",
)
@click.option(
    "--debootstrap",
    is_flag=True,
    help="Make the base image here with debootstrap instead (no registry needed; needs root).",
)
@click.option(
    "--torch",
    type=click.Choice(["cpu", "cuda"]),
    default="cpu",
    show_default=True,
    help="PyTorch build in the runner image (cuda for a GPU box with the NVIDIA toolkit).",
)
@click.option(
    "--role",
    "roles",
    type=click.Choice(ROLES),
    multiple=True,
    help="Build only these images (repeatable; default all three).",
)
@click.option(
    "--pins",
    "pins_out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the pins file of what was built here (for `toolkit run --images`).",
)
def build_command(
    base_image: str | None,
    debootstrap: bool,
    torch: str,
    roles: tuple[str, ...],
    pins_out: Path | None,
) -> None:
    """Build the images, tagged ari-bench/ROLE:VERSION, and print their digests.

    The runner's Python packages (torch 2.13.0 in the chosen build, numpy) are installed by
    pip on this host into the build context; the images' Debian packages come from Debian's
    index at build time (host network).

    \b
    Example:
      toolkit images build --torch cuda --pins images.json
      toolkit images build --debootstrap            # no registry: base from a Debian mirror
    """
    from toolkit.images.build import (
        DEFAULT_BASE,
        build_debootstrap_base,
        build_images,
        write_pins,
    )
    from toolkit.sandbox.docker.engine import connect

    console = make_console(stderr=True)
    if base_image and debootstrap:
        raise click.UsageError("--base-image and --debootstrap exclude each other")
    try:
        client = connect()
        base = base_image or DEFAULT_BASE
        if debootstrap:
            base = "ari-bench/base:bookworm"
            build_debootstrap_base(client, base, say=console.print)
        with console.status("building images..."):
            built = build_images(
                client,
                base=base,
                torch=torch,
                roles=roles or ROLES,
                say=lambda line: console.print(line, markup=False, highlight=False),
            )
    except (ImageError, SandboxError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    _print(built)
    if pins_out is not None:
        write_pins(pins_out, built)
        console.print(f"pins written to {pins_out} (use: toolkit run --images {pins_out})")


@images_group.command("list")
@click.option(
    "--images",
    "images_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="List the images of this pins file instead of this version's tags.",
)
def list_command(images_file: Path | None) -> None:
    """List the images a docker run would use: role, reference, digest, size.

    \b
    Example:
      toolkit images list
    """
    from toolkit.sandbox.docker.engine import connect

    try:
        client = connect()
        images = load_pins(images_file) if images_file is not None else current()
    except (ImageError, SandboxError) as exc:
        raise click.ClickException(str(exc)) from exc
    found: dict[str, Resolved] = {}
    missing: list[str] = []
    for role in ROLES:
        try:
            found[role] = resolve(client, images.ref(role), role)
        except ImageError as exc:
            missing.append(str(exc))
    _print(found)
    for line in missing:
        click.echo(f"missing: {line}", err=True)
    if missing:
        raise SystemExit(1)


def _print(found: dict[str, Resolved]) -> None:
    """One line per image, whole digests (they are what gets pinned and compared)."""
    for role, image in found.items():
        click.echo(f"{role:<11} {image.ref}  {image.digest}  {image.size / 2**20:.0f} MiB")
