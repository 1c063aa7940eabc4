"""The harness side of the FIFO channel (the protocol is described in `toolkit.runner.client`).

Everything in a call folder was made by the agent, so nothing in it is trusted: names are
checked, `out`/`err` must be FIFOs (never followed if they are links), and `rc` is written by
renaming a fresh file over it, so a planted symlink cannot redirect the write.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import select
import stat
import threading
from collections.abc import Callable
from pathlib import Path

from toolkit.runner.client import CALLS, REQUESTS

_NAME = re.compile(r"^[A-Za-z0-9]{8}$")
_MAX_ARGV = 1 << 20
_OPEN_TIMEOUT_S = 10.0


class ClientGone(Exception):
    """The agent's `runner` process went away (interrupted or killed) during a call."""


class BadRequest(Exception):
    """A malformed call folder (the agent's doing); answered by dropping the call."""


def make_channel(channel: Path) -> None:
    """Create the channel folder: the requests FIFO and the calls folder."""
    (channel / CALLS).mkdir(parents=True, exist_ok=True)
    fifo = channel / REQUESTS
    if not fifo.exists():
        os.mkfifo(fifo, 0o622)
    # The agent may run as another user (containers); it must be able to create call folders.
    (channel / CALLS).chmod(0o1777)
    channel.chmod(0o755)
    fifo.chmod(0o622)


def _open_fifo(path: Path, timeout: float = _OPEN_TIMEOUT_S) -> int:
    """Open a FIFO for writing, waiting for its reader at most `timeout` seconds.

    A blocking open returns the moment the client opens its end (no polling latency); if the
    client never does, a timer opens the reading end itself to release the open, and the call
    is treated as abandoned.
    """
    st = os.lstat(path)
    if not stat.S_ISFIFO(st.st_mode):
        raise BadRequest(f"{path.name} is not a FIFO")
    abandoned = threading.Event()
    unblockers: list[int] = []

    def unblock() -> None:
        abandoned.set()
        with contextlib.suppress(OSError):
            unblockers.append(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW))

    timer = threading.Timer(timeout, unblock)
    timer.daemon = True
    timer.start()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise ClientGone(str(exc)) from exc
    finally:
        timer.cancel()
    for extra in unblockers:
        os.close(extra)
    if abandoned.is_set():
        os.close(fd)
        raise ClientGone("the client never opened its end")
    return fd


class Call:
    """One `runner` call: its arguments and the two streams back to the agent.

    Everything written after the header is counted and hashed per stream for the audit log.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.name = folder.name
        self.argv = _read_argv(folder / "argv")
        self._err_fd: int | None = None
        self._out_fd: int | None = None
        self._lock = threading.Lock()
        self.bytes = {"stdout": 0, "stderr": 0}
        self._hash = {"stdout": hashlib.sha256(), "stderr": hashlib.sha256()}
        self.gone = False

    def open(self, header: str) -> None:
        """Open both streams; the header goes first, before any output can."""
        self._err_fd = _open_fifo(self.folder / "err")
        self._write(self._err_fd, (header + "\n").encode())
        self._out_fd = _open_fifo(self.folder / "out")

    def _write(self, fd: int, data: bytes) -> None:
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
        except OSError as exc:  # EPIPE: the client died
            self.gone = True
            raise ClientGone(str(exc)) from exc

    def write(self, stream: str, data: bytes) -> None:
        """Send bytes on 'stdout' or 'stderr' (raises `ClientGone`)."""
        fd = self._out_fd if stream == "stdout" else self._err_fd
        if fd is None or not data:
            return
        with self._lock:
            self.bytes[stream] += len(data)
            self._hash[stream].update(data)
        self._write(fd, data)

    def say(self, text: str) -> None:
        """A line from the runner itself, on stderr."""
        self.write("stderr", (text.rstrip("\n") + "\n").encode())

    def digest(self, stream: str) -> str:
        return self._hash[stream].hexdigest()

    def finish(self, code: int) -> None:
        """Write the exit code, then close the streams (the client reads `rc` after EOF)."""
        tmp = self.folder / f".rc.{secrets.token_hex(4)}"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            os.write(fd, f"{code}\n".encode())
            os.close(fd)
            os.replace(tmp, self.folder / "rc")
        except OSError:
            pass  # the client removed its folder: it is gone, nobody reads the code
        for stream_fd in (self._out_fd, self._err_fd):
            if stream_fd is not None:
                os.close(stream_fd)
        self._out_fd = self._err_fd = None


def _read_argv(path: Path) -> list[str]:
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_ARGV:
            raise BadRequest("argv is not a small regular file")
        raw = path.read_bytes()
    except OSError as exc:
        raise BadRequest(f"cannot read argv: {exc}") from exc
    if raw and not raw.endswith(b"\0"):
        raise BadRequest("argv is not NUL-terminated")
    return [a.decode("utf-8", "surrogateescape") for a in raw.split(b"\0")[:-1]]


class RequestLoop:
    """Reads request lines from the `requests` FIFO and hands each to a callback in a thread."""

    def __init__(
        self,
        channel: Path,
        on_call: Callable[[Path], None],
        on_cancel: Callable[[str], None],
    ) -> None:
        self.channel = channel
        self._on_call = on_call
        self._on_cancel = on_cancel
        self._wake_r, self._wake_w = os.pipe()
        # O_RDWR: we hold a writer ourselves, so the FIFO never reports EOF between clients
        # and a client's open() never blocks while the harness is alive.
        self._fd = os.open(channel / REQUESTS, os.O_RDWR | os.O_NONBLOCK)
        self._thread = threading.Thread(target=self._loop, name="runner-requests", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        os.write(self._wake_w, b"x")
        self._thread.join(timeout=5)
        for fd in (self._fd, self._wake_r, self._wake_w):
            os.close(fd)

    def _loop(self) -> None:
        buf = b""
        while True:
            ready, _, _ = select.select([self._fd, self._wake_r], [], [])
            if self._wake_r in ready:
                return
            try:
                chunk = os.read(self._fd, 65536)
            except BlockingIOError:
                continue
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                self._dispatch(line.decode("ascii", "replace").strip())

    def _dispatch(self, line: str) -> None:
        if line.startswith("cancel "):
            name = line.removeprefix("cancel ")
            if _NAME.match(name):
                self._on_cancel(name)
            return
        if not _NAME.match(line):
            return
        folder = self.channel / CALLS / line
        if folder.is_symlink() or not folder.is_dir():
            return
        threading.Thread(
            target=self._on_call, args=(folder,), name=f"runner-call-{line}", daemon=True
        ).start()
