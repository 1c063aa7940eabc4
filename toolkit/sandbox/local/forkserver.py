"""Host side of the launcher: one fork server per sandbox, one message per command.

A command is sent as its spec (marshal) plus four descriptors (stdin, stdout, stderr, status)
over a SOCK_SEQPACKET socketpair, so each message arrives whole with its descriptors; the reply
is the new tree's pid with a pidfd for it. The server exits, killing what it launched, when
this end closes (also when the host dies).
"""

from __future__ import annotations

import array
import errno
import marshal
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

from toolkit.sandbox.base import SandboxError

LAUNCHER = Path(__file__).with_name("launcher.py")
MAX_SPEC_BYTES = 1 << 20  # as in launcher.py


def _host_pid(pidfd: int) -> int:
    """The pid as this process sees it (the server may live in a PID namespace of its own)."""
    with open(f"/proc/self/fdinfo/{pidfd}") as f:
        for line in f:
            if line.startswith("Pid:"):
                return int(line.split()[1])
    raise SandboxError("the sandbox launcher sent something that is not a pidfd")


class ForkServer:
    """Starts lazily; thread-safe; restarts once if it died between two commands."""

    def __init__(self, userns: bool) -> None:
        self.mode = "userns" if userns else "plain"
        self._lock = threading.Lock()
        self._popen: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None

    def _start(self) -> socket.socket:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, MAX_SPEC_BYTES * 2)
        try:
            self._popen = subprocess.Popen(
                [sys.executable, "-I", "-S", str(LAUNCHER), str(theirs.fileno()), self.mode],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                start_new_session=True,
                env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"},
            )
        except OSError as e:
            ours.close()
            raise SandboxError(f"could not start the sandbox launcher: {e}") from e
        finally:
            theirs.close()
        self._sock = ours
        return ours

    def launch(self, spec: dict[str, object], fds: list[int]) -> tuple[int, int]:
        """Start `spec` with these descriptors (still ours to close): its pid and a pidfd."""
        payload = marshal.dumps(spec)
        if len(payload) > MAX_SPEC_BYTES:
            raise ValueError(f"command and environment too large ({len(payload)} bytes)")
        message = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
        with self._lock:  # one request, one reply: replies cannot cross between threads
            for attempt in (1, 2):
                sock = self._sock if self._alive() else None
                if sock is None:
                    self._close_locked()
                    sock = self._start()
                try:
                    sock.sendmsg([payload], message)
                    text, ancdata, _, _ = sock.recvmsg(1024, socket.CMSG_SPACE(4))
                except OSError as e:
                    if e.errno == errno.EMSGSIZE:  # above this host's socket buffer limit
                        raise ValueError(
                            f"command and environment too large ({len(payload)} bytes)"
                        ) from e
                    text, ancdata = f"error: {e}".encode(), []
                pidfds = [
                    fd
                    for level, kind, data in ancdata
                    if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS
                    for fd in array.array("i", data[: len(data) - len(data) % 4])
                ]
                if text and pidfds:
                    return _host_pid(pidfds[0]), pidfds[0]
                for fd in pidfds:
                    os.close(fd)
                if text.startswith(b"error: unshare"):
                    raise SandboxError(f"the sandbox launcher failed: {text.decode()[7:]}")
                if attempt == 2:
                    reason = text.decode(errors="replace") or "it exited"
                    raise SandboxError(f"the sandbox launcher is unreachable ({reason})")
                self._close_locked()
        raise AssertionError("unreachable")

    def _alive(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    def close(self) -> None:
        """Stop the server (it kills anything it launched that is still running)."""
        with self._lock:
            self._close_locked()

    def _close_locked(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._popen is not None:
            try:
                self._popen.wait(10)
            except subprocess.TimeoutExpired:
                self._popen.kill()
                self._popen.wait()
            self._popen = None
