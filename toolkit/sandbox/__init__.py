"""Sandboxes: where submitted and agent code runs, chosen by backend name.

    from toolkit.sandbox import Limits, create_sandbox
    with create_sandbox("local", root=workdir, hide=[exam_dir]) as box:
        result = box.exec(["python", "-c", "print(1)"], timeout=10)

`local` is the only backend so far; `docker` will implement the same `Sandbox` class and pass
the same conformance tests (`tests/sandbox/`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from toolkit.sandbox.base import (
    NO_LIMITS,
    ExecResult,
    Limits,
    Sandbox,
    SandboxError,
    SandboxProcess,
)
from toolkit.sandbox.streams import LineReader

BACKENDS = ("local",)

__all__ = [
    "BACKENDS",
    "ExecResult",
    "Limits",
    "LineReader",
    "Sandbox",
    "SandboxError",
    "SandboxProcess",
    "create_sandbox",
]


def create_sandbox(
    backend: str,
    *,
    root: Path,
    network: bool = False,
    hide: Sequence[Path] = (),
    limits: Limits = NO_LIMITS,
    env: Mapping[str, str] | None = None,
    readonly: Sequence[Path] = (),
) -> Sandbox:
    """A sandbox of `backend` working in `root`.

    `hide`: host paths that must be invisible inside; `readonly`: host paths visible but not
    writable; `env`: variables added to the scrubbed environment (PATH, HOME, LANG, TMPDIR).
    """
    if backend == "local":
        from toolkit.sandbox.local import LocalSandbox

        return LocalSandbox(
            root, network=network, hide=hide, limits=limits, env=env, readonly=readonly
        )
    known = ", ".join(repr(b) for b in BACKENDS)
    raise ValueError(f"unknown sandbox backend {backend!r}; known backends: {known}")
