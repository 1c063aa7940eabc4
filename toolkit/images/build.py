"""Building the images: from a base image the operator names, or from a local Debian root.

`build_images` builds controller, runner and proxy from `BASE` (default `debian:bookworm-slim`
from a registry). What the runner needs from PyPI (torch 2.13.0 and numpy) is installed on the
host first, with `pip install --target` into the build context, so the build itself needs only
Debian's package index (reached with the host's network: `network_mode="host"`, which also
works on an engine started without a bridge).

`build_debootstrap_base` makes a base image without any registry: `debootstrap` writes a Debian
root filesystem from a Debian mirror and `docker import` loads it (CI does this; it needs root
and the `debootstrap` package).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolkit.images import IMAGES_DIR, REPOSITORY, ROLES, ImageError, ImageSet, default_tag
from toolkit.images.resolve import Resolved, resolve

DEFAULT_BASE = "debian:bookworm-slim"
TORCH_VERSION = "2.13.0"
DEBIAN_SUITE = "bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
# Left out of the imported root: caches and documentation nobody in a sandbox needs.
_BASE_EXCLUDES = ("var/cache/apt/", "var/lib/apt/lists/", "usr/share/doc/", "usr/share/man/")

Say = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


def _numpy_pin() -> str:
    """numpy at the version this toolkit runs with, so that grading behaves the same."""
    try:
        return f"numpy=={importlib.metadata.version('numpy')}"
    except importlib.metadata.PackageNotFoundError:
        return "numpy"


def torch_requirements(torch: str) -> tuple[list[str], list[str]]:
    """(requirements, extra pip arguments) for the runner's PyTorch build."""
    if torch == "cpu":
        # The CPU build: pip must find torch==2.13.0+cpu (the PyTorch CPU index, or a local
        # wheel folder in the operator's pip configuration).
        return [f"torch=={TORCH_VERSION}+cpu", _numpy_pin()], []
    if torch == "cuda":
        # PyPI's Linux wheel of torch is the CUDA build (with its nvidia-* libraries).
        return [f"torch=={TORCH_VERSION}", _numpy_pin()], ["--index-url", "https://pypi.org/simple"]
    raise ValueError(f"--torch must be cpu or cuda, not {torch!r}")


def install_site_packages(target: Path, torch: str, say: Say = _quiet) -> None:
    """pip-install the runner's Python packages for CPython 3.11 on Linux into `target`."""
    requirements, extra = torch_requirements(torch)
    say(f"installing {' '.join(requirements)} for the runner image (pip, on the host)")
    command = [
        sys.executable, "-m", "pip", "install", "--quiet", "--no-compile",
        "--target", str(target), "--only-binary=:all:", "--python-version", "3.11",
        "--implementation", "cp", "--platform", "manylinux_2_28_x86_64",
        "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_17_x86_64",
        *extra, *requirements,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        tail = " ".join(done.stderr.strip().splitlines()[-3:])
        raise ImageError(f"pip could not install {' '.join(requirements)}: {tail}")
    for junk in target.glob("*/__pycache__"):
        shutil.rmtree(junk, ignore_errors=True)
    shutil.rmtree(target / "bin", ignore_errors=True)  # console scripts point at the host


SOURCES_LABEL = "org.ari-bench.sources"


def sources_digest(torch: str = "cpu") -> str:
    """What the images are made of (their files here and the runner's pip requirements), as a
    short hash: every image is labelled with it, so a stale image can be told apart."""
    digest = hashlib.sha256()
    for path in sorted(IMAGES_DIR.iterdir()):
        if path.suffix in (".c", ".py", ".Dockerfile") and path.name not in _NOT_SOURCES:
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    digest.update(repr(torch_requirements(torch)).encode())
    return digest.hexdigest()[:16]


_NOT_SOURCES = ("__init__.py", "build.py", "resolve.py")


def _context(role: str, work: Path, torch: str, say: Say) -> Path:
    context = work / role
    context.mkdir()
    shutil.copy2(IMAGES_DIR / f"{role}.Dockerfile", context / "Dockerfile")
    shutil.copy2(IMAGES_DIR / "ari-init.c", context / "ari-init.c")
    if role == "proxy":
        shutil.copy2(IMAGES_DIR / "egress.py", context / "egress.py")
    if role == "runner":
        install_site_packages(context / "site", torch, say)
    return context


def _build_one(client: Any, context: Path, tag: str, base: str, torch: str, say: Say) -> str:
    """Build the Dockerfile in `context` as `tag`; return the image id."""
    image_id = None
    last_lines: list[str] = []
    stream = client.api.build(
        path=str(context),
        tag=tag,
        buildargs={"BASE": base, "TORCH": torch},
        network_mode="host",
        rm=True,
        forcerm=True,
        decode=True,
        labels={"org.ari-bench.toolkit": default_tag(), SOURCES_LABEL: sources_digest(torch)},
    )
    for chunk in stream:
        if "error" in chunk:
            detail = " ".join(last_lines[-3:])
            raise ImageError(f"building {tag} failed: {chunk['error'].strip()} ({detail})")
        text = str(chunk.get("stream", "")).strip()
        if text:
            last_lines = [*last_lines[-5:], text]
            if text.startswith("Step "):
                say(f"{tag}: {text}")
        aux = chunk.get("aux") or {}
        if "ID" in aux:
            image_id = aux["ID"]
    if image_id is None:
        raise ImageError(f"building {tag} gave no image id ({' '.join(last_lines[-3:])})")
    return str(image_id)


def build_images(
    client: Any,
    *,
    base: str = DEFAULT_BASE,
    torch: str = "cpu",
    tag: str | None = None,
    roles: tuple[str, ...] = ROLES,
    say: Say = _quiet,
) -> dict[str, Resolved]:
    """Build the images of `roles` from `base`; return each as the engine now has it."""
    tag = tag or default_tag()
    if torch not in ("cpu", "cuda"):
        raise ValueError(f"--torch must be cpu or cuda, not {torch!r}")
    built: dict[str, Resolved] = {}
    with tempfile.TemporaryDirectory(prefix="ari-images-") as tmp:
        for role in roles:
            context = _context(role, Path(tmp), torch, say)
            ref = f"{REPOSITORY}/{role}:{tag}"
            say(f"building {ref} from {base}")
            _build_one(client, context, ref, base, torch, say)
            built[role] = resolve(client, ref, role)
            shutil.rmtree(context, ignore_errors=True)
    return built


def pins_of(built: dict[str, Resolved]) -> dict[str, str]:
    """The pins file content for what was built: role -> `name@sha256:...`."""
    return {role: image.digest for role, image in built.items()}


def write_pins(path: Path, built: dict[str, Resolved]) -> None:
    path.write_text(json.dumps(pins_of(built), indent=2, sort_keys=True) + "\n", encoding="utf-8")


def image_set(pins: dict[str, str]) -> ImageSet:
    return ImageSet(**{role: pins[role] for role in ROLES})


def build_debootstrap_base(
    client: Any,
    tag: str = f"{REPOSITORY}/base:{DEBIAN_SUITE}",
    *,
    suite: str = DEBIAN_SUITE,
    mirror: str = DEBIAN_MIRROR,
    say: Say = _quiet,
) -> str:
    """A Debian base image made without any registry: debootstrap, then `docker import`.

    Needs root and Debian's `debootstrap`. Returns the image id.
    """
    if os.geteuid() != 0:
        raise ImageError("building a base image with debootstrap needs root")
    if shutil.which("debootstrap") is None:
        raise ImageError("debootstrap is not installed: apt-get install debootstrap")
    with tempfile.TemporaryDirectory(prefix="ari-base-", dir="/var/tmp") as tmp:
        rootfs = Path(tmp) / "rootfs"
        say(f"debootstrap {suite} (minbase) from {mirror}")
        done = subprocess.run(
            ["debootstrap", "--variant=minbase", suite, str(rootfs), mirror],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            tail = " ".join(done.stdout.strip().splitlines()[-3:])
            raise ImageError(f"debootstrap failed: {tail}")
        archive = Path(tmp) / "rootfs.tar"
        with tarfile.open(archive, "w") as tar:
            for entry in sorted(rootfs.iterdir()):
                tar.add(entry, arcname=entry.name, filter=_drop_caches)
        say(f"docker import as {tag}")
        repository, _, version = tag.rpartition(":")
        client.api.import_image_from_file(
            str(archive), repository=repository, tag=version, changes=['CMD ["/bin/bash"]']
        )
    return resolve(client, tag, "base").id


def _drop_caches(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    if info.isdir():  # folders stay (apt expects its own); their files go
        return info
    if any(info.name.startswith(prefix) for prefix in _BASE_EXCLUDES):
        return None
    return info
