"""Finding a test's processes on the host by a token in their command line."""

from __future__ import annotations

import os
import time
from pathlib import Path


def survivors(token: str, wait_s: float = 0.0) -> list[str]:
    """Processes whose command line holds `token` ("PID: command line"), after waiting up to
    `wait_s` for there to be none."""
    deadline = time.monotonic() + wait_s
    while True:
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if token.encode() in cmdline:
                found.append(entry + ": " + cmdline.replace(b"\0", b" ").decode(errors="replace"))
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(0.1)
