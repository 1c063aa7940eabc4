"""Scratch folders on the host's own disk, seen by a sandbox as the host has them.

Sandboxes get private, empty places for /tmp, /var/tmp, /run, ... and the caller's home: a test
that needs a sandbox to see (or to be denied) a host folder must put it elsewhere. The checkout's
`.ari/` is the usual place; a checkout that itself lies in such a place (a CI clone under /tmp)
uses a folder under /var/lib instead.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from toolkit.sandbox.local.layout import is_within, private_places

REPO = Path(__file__).resolve().parents[1]
FALLBACK = Path("/var/lib/ari-bench-tests")


def _seen_as_is(path: Path) -> bool:
    real = Path(os.path.realpath(path))
    home = Path(os.path.realpath(Path.home()))
    return not private_places().holds(real) and not is_within(real, home)


def scratch_base() -> Path:
    """The folder new scratch folders go in (created), outside every sandbox-private place."""
    for base in (REPO / ".ari", FALLBACK):
        if not _seen_as_is(base):
            continue
        try:
            base.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        return base
    pytest.fail("no folder outside /tmp, /run and the home to put host scratch folders in")


def host_scratch(prefix: str) -> Path:
    """A new, empty folder `PREFIX-<random>` under `scratch_base()` (the caller removes it)."""
    path = scratch_base() / f"{prefix}-{uuid.uuid4().hex[:12]}"
    path.mkdir(parents=True)
    return path
