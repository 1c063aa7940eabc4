"""Waiting for a state instead of sleeping for it: a loaded CI box runs everything late."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(check: Callable[[], object], timeout: float = 15.0) -> object:
    """`check()`'s first truthy value, asked every 50 ms for up to `timeout` s; None if none."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    return None
