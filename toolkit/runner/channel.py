"""The harness side of the FIFO channel (the protocol is described in `toolkit.runner.client`).

Everything in a call folder was made by the agent, so nothing in it is trusted. The calls folder
is opened once, when the service starts, and every call folder is opened relative to it without
following links, and then every file in it relative to that: renaming `.runner` or `calls`, or
swapping a call folder for a link, can never make the harness (root) read, write or delete
anything outside the agent's own folders. `out`/`err` must be FIFOs (checked on the opened file),
writes to them never block past the call's deadline, and `rc` is written by renaming a fresh
file over it, so a planted link cannot redirect the write.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import secrets
import select
import shutil
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path

from toolkit.runner.audit import (
    BUDGET_HEAD_BYTES,
    INLINE_REQUEST_BYTES,
    REQUEST_HEAD_BYTES,
    ArgsBudget,
    b64_size,
    stored_size,
    to_bytes,
)
from toolkit.runner.client import CALLS, REQUESTS

NAME = re.compile(r"^[A-Za-z0-9]{8}$")
MAX_ARGV_BYTES = INLINE_REQUEST_BYTES  # a longer argument list is refused (and audited)
OPEN_TIMEOUT_S = 10.0  # how long the client has to open each of its FIFOs
_MAX_LINE = 4096  # a request line is a name or `cancel NAME`: anything longer is junk
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class ClientGone(Exception):
    """The agent's `runner` process went away (or stopped reading) during a call."""


class BadRequest(Exception):
    """A malformed call (the agent's doing): refused, with a reply where one can be sent."""


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


class CallsFolder:
    """The channel's `calls` folder, held open: call folders are reached only through it.

    Calls are served, and finished ones removed, in threads of their own while the service may
    stop: the descriptor is used and closed under a lock, so no thread ever works through a
    closed descriptor, or through its number reused by another file meanwhile."""

    def __init__(self, path: Path) -> None:
        self._fd: int | None = os.open(path, _DIR_FLAGS)
        self._lock = threading.Lock()
        self.budget = ArgsBudget()  # the run's audited argument bytes: one folder, one run

    def open_call(self, name: str) -> int:
        """A descriptor of the call folder `name` (BadRequest if it is missing or a link)."""
        if not NAME.match(name):
            raise BadRequest(f"{name!r} is not a call name")
        with self._lock:
            if self._fd is None:
                raise BadRequest("the service has stopped")
            try:
                return os.open(name, _DIR_FLAGS, dir_fd=self._fd)
            except OSError as exc:
                raise BadRequest(f"no call folder {name} ({exc.strerror})") from exc

    def remove(self, name: str) -> None:
        """Delete a finished call's folder (never following links out of it)."""
        with self._lock:  # a copy of the descriptor: an agent's huge folder holds no lock
            if self._fd is None:
                return
            fd = os.dup(self._fd)
        try:
            with contextlib.suppress(OSError):
                shutil.rmtree(name, dir_fd=fd)
        finally:
            os.close(fd)

    def close(self) -> None:
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def _open_fifo(dir_fd: int, name: str, timeout: float | None = None) -> int:
    """Open the FIFO `name` of a call folder for writing, waiting for its reader at most
    `timeout` seconds (default `OPEN_TIMEOUT_S`); the descriptor returned is non-blocking.

    A blocking open returns the moment the client opens its end (no polling latency); if the
    client never does, a timer opens the reading end itself to release the open, and the call
    is treated as abandoned. What was opened is checked to be a FIFO (a regular file or a link
    in its place is refused before anything is written).
    """
    lock = threading.Lock()
    abandoned = threading.Event()  # set by the timer, under the lock
    done = threading.Event()  # set by the opener, under the lock: the timer does nothing now
    unblockers: list[int] = []

    def unblock() -> None:
        # Under the lock, and only while the open is still pending: a timer that fires as the
        # open returns must neither leave a reader open (it would hide the client's end: no
        # EPIPE) nor use `dir_fd` after this function returned (the caller closes it).
        with lock:
            if done.is_set():
                return
            abandoned.set()
            with contextlib.suppress(OSError):
                flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
                unblockers.append(os.open(name, flags, dir_fd=dir_fd))

    timer = threading.Timer(OPEN_TIMEOUT_S if timeout is None else timeout, unblock)
    timer.daemon = True
    timer.start()
    try:
        fd = os.open(name, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError as exc:
        raise BadRequest(f"cannot open {name}: {exc.strerror}") from exc
    finally:
        timer.cancel()
        with lock:
            done.set()
            for extra in unblockers:
                os.close(extra)
    if not stat.S_ISFIFO(os.fstat(fd).st_mode):
        os.close(fd)
        raise BadRequest(f"{name} is not a FIFO")
    if abandoned.is_set():
        os.close(fd)
        raise ClientGone(f"the client never opened its {name} FIFO")
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)
    return fd


def _read_argv(dir_fd: int) -> tuple[bytes, int]:
    """The raw argument file of a call (at most MAX_ARGV_BYTES + 1 bytes are read) and its
    size."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open("argv", flags, dir_fd=dir_fd)
    except OSError as exc:
        raise BadRequest(f"no readable argument file ({exc.strerror})") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise BadRequest("the argument file is not a regular file")
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_ARGV_BYTES:
            chunk = os.read(fd, MAX_ARGV_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks), max(size, st.st_size)
    except OSError as exc:
        raise BadRequest(f"cannot read the argument file ({exc.strerror})") from exc
    finally:
        os.close(fd)


class Call:
    """One `runner` call: its arguments and the two streams back to the agent.

    Made from an open call folder; a malformed argument file does not raise here: `problem`
    says what is wrong (the service refuses the call, with a reply) and `request` keeps what was
    found for the audit log. Everything written after the header is counted and hashed per
    stream. Writes wait for a slow reader at most until `deadline` (monotonic seconds), and
    nothing is written once the call is finished (its descriptors may be reused by then).
    """

    def __init__(
        self, name: str, dir_fd: int, deadline: float, budget: ArgsBudget | None = None
    ) -> None:
        self.name = name
        self._dir = dir_fd
        self.deadline = deadline
        self.argv_bytes: list[bytes] | None = None
        self.problem: str | None = None
        self.request: bytes | None = None
        self.request_bytes: int | None = None
        self._fds: dict[str, int | None] = {"stdout": None, "stderr": None}
        self._lock = threading.Lock()
        self.bytes = {"stdout": 0, "stderr": 0}
        self._hash = {"stdout": hashlib.sha256(), "stderr": hashlib.sha256()}
        self.gone = False
        self.closed = False
        self.note: str | None = None  # a handler's word for the audit entry (why it refused)
        self._released = False  # the serving thread is done with the folder's descriptor
        try:
            raw, size = _read_argv(dir_fd)
        except BadRequest as exc:
            self.problem = str(exc)
            return
        if len(raw) > MAX_ARGV_BYTES:
            self.problem = (
                f"the argument list is {size:,} bytes, over the limit of {MAX_ARGV_BYTES:,}; "
                "pass long input in a file"
            )
            self.request, self.request_bytes = raw[:REQUEST_HEAD_BYTES], size
        elif raw and not raw.endswith(b"\0"):
            self.problem = "the argument list does not end with a NUL byte"
            self.request, self.request_bytes = raw, len(raw)
        else:
            self.argv_bytes = raw.split(b"\0")[:-1]
        if budget is not None:
            self._charge(budget, raw, size)

    def _charge(self, budget: ArgsBudget, raw: bytes, size: int) -> None:
        """Count what the audit entry will keep of the arguments against the run's budget;
        past it, refuse the call and keep only a short head of its arguments."""
        if self.argv_bytes is not None:
            stored = stored_size(self.argv_bytes)
        else:
            stored = b64_size(len(self.request or b""))
        if budget.take(len(raw), stored):
            return
        self.problem = self.problem or budget.refusal(size)  # a malformed call stays so
        self.argv_bytes = None
        self.request, self.request_bytes = raw[:BUDGET_HEAD_BYTES], size

    @property
    def argv(self) -> list[str]:
        """The arguments as text (bytes that are not UTF-8 are surrogate-escaped: `os.fsencode`
        gives them back exactly, so a command receives what the agent passed)."""
        return [os.fsdecode(a) for a in self.argv_bytes or []]

    def open_stderr(self, header: str) -> None:
        """Open the stderr FIFO and send the header first, before any output can go."""
        fd = _open_fifo(self._dir, "err")
        with self._lock:
            if self.closed:
                os.close(fd)
                raise ClientGone("the call was closed")
            self._fds["stderr"] = fd
        self._send("stderr", (header + "\n").encode())

    def open_stdout(self) -> None:
        fd = _open_fifo(self._dir, "out")
        with self._lock:
            if self.closed:
                os.close(fd)
                raise ClientGone("the call was closed")
            self._fds["stdout"] = fd

    def _send(self, stream: str, data: bytes) -> None:
        view = memoryview(data)
        while view:
            with self._lock:
                fd = self._fds[stream]
                if self.closed or fd is None:
                    raise ClientGone("the call was closed")
                try:
                    n = os.write(fd, view)
                except BlockingIOError:
                    n = 0
                except OSError as exc:  # EPIPE: the client died
                    self.gone = True
                    raise ClientGone(str(exc)) from exc
            view = view[n:]
            if view and not n:
                if time.monotonic() >= self.deadline:
                    self.gone = True
                    raise ClientGone("the client stopped reading its output")
                # A hint only: the loop re-checks under the lock (fd may be closed meanwhile).
                with contextlib.suppress(OSError, ValueError):
                    select.select([], [fd], [], 0.2)

    def write(self, stream: str, data: bytes) -> None:
        """Send bytes on 'stdout' or 'stderr' (raises `ClientGone`)."""
        if not data:
            return
        with self._lock:
            if self._fds[stream] is None:
                return
            self.bytes[stream] += len(data)
            self._hash[stream].update(data)
        self._send(stream, data)

    def say(self, text: str) -> None:
        """A line from the runner itself, on stderr."""
        self.write("stderr", to_bytes(text.rstrip("\n") + "\n"))

    def digest(self, stream: str) -> str:
        return self._hash[stream].hexdigest()

    def finish(self, code: int) -> None:
        """Write the exit code, then close the streams (the client reads `rc` after EOF).

        Never raises: a client that removed its folder is gone, nobody reads the code. Another
        thread (the watchdog, the service's stop) may finish the call while its serving thread
        ends: the folder's descriptor stays open until both are done with it."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            fds = [fd for fd in self._fds.values() if fd is not None]
            self._fds = {"stdout": None, "stderr": None}
            self._write_rc(code)
            if self._released:
                self._close_dir()
        for stream_fd in fds:
            with contextlib.suppress(OSError):
                os.close(stream_fd)

    def _write_rc(self, code: int) -> None:
        """`rc`, written by renaming a fresh file over it (a planted link is replaced)."""
        tmp = f".rc.{secrets.token_hex(4)}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(tmp, flags, 0o644, dir_fd=self._dir)
            try:
                os.write(fd, f"{code}\n".encode())
            finally:
                os.close(fd)
            os.replace(tmp, "rc", src_dir_fd=self._dir, dst_dir_fd=self._dir)
        except OSError:
            pass

    def release(self) -> None:
        """The serving thread is done with the call folder. Its descriptor is closed now if the
        call is finished, else by `finish` (which another thread is about to run)."""
        with self._lock:
            self._released = True
            if self.closed:
                self._close_dir()

    def _close_dir(self) -> None:
        if self._dir >= 0:
            with contextlib.suppress(OSError):
                os.close(self._dir)
            self._dir = -1


class RequestLoop:
    """Reads request lines from the `requests` FIFO and hands each to a callback in a thread."""

    def __init__(
        self,
        channel: Path,
        on_call: Callable[[str], None],
        on_cancel: Callable[[str], None],
    ) -> None:
        self.channel = channel
        self._on_call = on_call
        self._on_cancel = on_cancel
        self._wake_r, self._wake_w = os.pipe()
        # O_RDWR: we hold a writer ourselves, so the FIFO never reports EOF between clients
        # and a client's open() never blocks while the harness is alive.
        self._fd = os.open(channel / REQUESTS, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
        self._buf = b""
        self._close_lock = threading.Lock()
        self._close_on_exit = False  # `stop` gave up waiting: the loop closes what it used
        self._thread = threading.Thread(target=self._loop, name="runner-requests", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> list[str]:
        """Stop reading; return the names of calls requested but not yet read (the run ends
        with them unserved, but not unrecorded)."""
        os.write(self._wake_w, b"x")
        self._thread.join(timeout=5)
        with self._close_lock:
            if self._thread.is_alive():  # serving a call itself (no thread to be had):
                self._close_on_exit = True  # it closes its descriptors when it returns
                return []
            pending: list[str] = []
            with contextlib.suppress(OSError):
                while chunk := os.read(self._fd, 65536):
                    self._buf += chunk
            for line in self._lines():
                if NAME.match(line):
                    pending.append(line)
            self._close()
        return pending

    def _close(self) -> None:
        for fd in (self._fd, self._wake_r, self._wake_w):
            os.close(fd)

    def _lines(self) -> list[str]:
        """Complete request lines read so far (the rest stays buffered)."""
        *lines, self._buf = self._buf.split(b"\n")
        if len(self._buf) > _MAX_LINE:
            self._buf = b""  # junk without a newline: never let it grow without bound
        return [ln.decode("ascii", "replace").strip() for ln in lines if len(ln) <= _MAX_LINE]

    def _loop(self) -> None:
        try:
            self._read_requests()
        finally:
            with self._close_lock:
                if self._close_on_exit:
                    self._close()

    def _read_requests(self) -> None:
        while True:
            ready, _, _ = select.select([self._fd, self._wake_r], [], [])
            if self._wake_r in ready:
                return
            try:
                self._buf += os.read(self._fd, 65536)
            except BlockingIOError:
                continue
            for line in self._lines():
                self._dispatch(line)

    def _dispatch(self, line: str) -> None:
        if line.startswith("cancel "):
            name = line.removeprefix("cancel ")
            if NAME.match(name):
                self._on_cancel(name)
            return
        if not NAME.match(line):
            return  # not a call (the client only ever sends names): nothing to answer
        thread = threading.Thread(
            target=self._on_call, args=(line,), name=f"runner-call-{line}", daemon=True
        )
        try:
            thread.start()
        except RuntimeError:  # no thread to be had: serve it here rather than lose it
            self._on_call(line)
