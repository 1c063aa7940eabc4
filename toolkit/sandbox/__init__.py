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
    """A sandbox of `backend` working in `root` (an existing directory; commands start there).

    `network`: False = no network at all (a loopback of its own only). `hide`: host paths that
    must be invisible inside (an exam, results, banks). `readonly`: host paths visible but not
    writable (training data). `limits`: caps per process tree. `env`: variables added to the
    scrubbed environment (PATH, HOME=root, LANG=C.UTF-8, TMPDIR inside root).

    The sandbox may run commands as another user (`nobody` for the local backend as root): it
    is handed the files already in `root` when created; put later files in with `write_file`.
    Read `isolation` / `not_isolated` for what is in force on this host, and record them.
    Raises ValueError for an unknown backend or contradictory paths, SandboxError when the
    sandbox cannot be set up.
    """
    if backend == "local":
        from toolkit.sandbox.local import LocalSandbox

        return LocalSandbox(
            root, network=network, hide=hide, limits=limits, env=env, readonly=readonly
        )
    known = ", ".join(repr(b) for b in BACKENDS)
    raise ValueError(f"unknown sandbox backend {backend!r}; known backends: {known}")
