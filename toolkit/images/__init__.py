"""The Docker images of a run: which image each role uses, and pinning them by digest.

Three images (Dockerfiles beside this file, built by `toolkit images build`):

    controller   the agent's shell: shell tools and git, no Python, no GPU libraries
    runner       Python 3.11, PyTorch 2.13.0 (CPU or CUDA build) and numpy; also the grader's
    proxy        the egress forwarder that is a controller's only way to its model provider

Every image has `ari-init` (`ari-init.c`) as PID 1 and as the wrapper of every command.

A reference is anything the engine resolves (`ari-bench/runner:0.1.0`, an image id
`sha256:...`, or `name@sha256:...`). A *pins file* (JSON: role -> `name@sha256:DIGEST`) fixes
the exact images of a run: the digest must be the image's id on this engine or one of its
registry digests, otherwise the run refuses to start (`ImageError`, one line).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from toolkit import __version__

IMAGES_DIR = Path(__file__).resolve().parent
REPOSITORY = "ari-bench"
INIT_PATH = "/usr/local/sbin/ari-init"
ROLES = ("controller", "runner", "proxy")
ROLE_LABEL = "org.ari-bench.role"


class ImageError(RuntimeError):
    """An image is missing or is not the pinned one; the message says which and what to do."""


def default_tag() -> str:
    """Images are tagged with the toolkit version (a local `+` is not allowed in a tag)."""
    return __version__.replace("+", "-")


@dataclass(frozen=True)
class ImageSet:
    """The image reference of each role (the grader runs the runner image)."""

    controller: str
    runner: str
    proxy: str

    @classmethod
    def default(cls) -> ImageSet:
        tag = default_tag()
        return cls(**{role: f"{REPOSITORY}/{role}:{tag}" for role in ROLES})

    def ref(self, role: str) -> str:
        return str(getattr(self, "runner" if role == "grader" else role))

    def as_dict(self) -> dict[str, str]:
        return {f.name: str(getattr(self, f.name)) for f in fields(self)}


_pinned: ImageSet | None = None


def pin(images: ImageSet | None) -> None:
    """Make `images` the ones every Docker sandbox of this process uses (None: the defaults).

    Set by the CLI from `--images FILE` before a run or a grading starts."""
    global _pinned
    _pinned = images


def current() -> ImageSet:
    """The images in use: the pinned ones, else the default tags of this toolkit version."""
    return _pinned or ImageSet.default()


def load_pins(path: Path) -> ImageSet:
    """Read a pins file; every role must be pinned as `name@sha256:<64 hex>`."""
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ImageError(f"{path}: cannot read the image pins file ({exc})") from exc
    if not isinstance(data, dict):
        raise ImageError(f"{path}: want a JSON object mapping role to image reference")
    missing = [role for role in ROLES if role not in data]
    if missing:
        raise ImageError(f"{path}: no image pinned for {', '.join(missing)}")
    for role in ROLES:
        ref = data[role]
        if not isinstance(ref, str) or split_digest(ref)[1] is None:
            raise ImageError(f"{path}: {role}: {ref!r} is not pinned by digest (name@sha256:...)")
    return ImageSet(**{role: data[role] for role in ROLES})


def split_digest(ref: str) -> tuple[str, str | None]:
    """`name@sha256:hex` -> (name, "sha256:hex"); a bare `sha256:hex` -> ("", it)."""
    name, _, digest = ref.rpartition("@")
    if not name and ref.startswith("sha256:"):
        name, digest = "", ref
    if not digest.startswith("sha256:") or len(digest) != 71:
        return ref, None
    try:
        int(digest[7:], 16)
    except ValueError:
        return ref, None
    return name, digest
