"""A thread that keeps pipes of its own busy: a descriptor closed or read by another thread
(a use-after-close race in the code under test) shows up as pipes it loses."""

from __future__ import annotations

import errno
import os
import threading


class Bystander:
    """A thread that keeps pipes of its own busy and counts the ones closed under it."""

    def __init__(self) -> None:
        self.stolen = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            r, w = os.pipe()
            try:
                for _ in range(20):
                    os.write(w, b"x")
                    if os.read(r, 1) != b"x":
                        raise OSError(errno.EBADF, "read someone else's bytes")
            except OSError:
                self.stolen += 1  # its numbers may be someone else's now: leave them be
                continue
            os.close(r)
            os.close(w)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.stolen
