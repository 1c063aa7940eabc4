"""Host side of the launcher: one fork server per sandbox, one message per command.

A command is sent as its spec (marshal) plus four descriptors (stdin, stdout, stderr, status)
over a SOCK_SEQPACKET socketpair, so each message arrives whole with its descriptors. The server
exits, killing what it launched, when this end closes (also when the host dies).
"""

from __future__ import annotations

import array
import marshal
import socket
import subprocess
import sys
import threading
from pathlib import Path

from toolkit.sandbox.base import SandboxError

LAUNCHER = Path(__file__).with_name("_launcher.py")
MAX_SPEC_BYTES = 1 << 20  # as in _launcher.py


class ForkServer:
    """Starts lazily; thread-safe; restarts once if it died between two commands."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._popen: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None

    def _start(self) -> socket.socket:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, MAX_SPEC_BYTES * 2)
        try:
            self._popen = subprocess.Popen(
                [sys.executable, "-I", "-S", str(LAUNCHER), str(theirs.fileno())],
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

    def send(self, spec: dict[str, object], fds: list[int]) -> None:
        """Ask the server to launch `spec` with these descriptors (they stay ours to close)."""
        payload = marshal.dumps(spec)
        if len(payload) > MAX_SPEC_BYTES:
            raise ValueError(f"command and environment too large ({len(payload)} bytes)")
        message = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
        with self._lock:
            for attempt in (1, 2):
                sock = self._sock if self._alive() else None
                if sock is None:
                    self._close_locked()
                    sock = self._start()
                try:
                    sock.sendmsg([payload], message)
                    return
                except OSError as e:
                    if attempt == 2:
                        raise SandboxError(f"the sandbox launcher is unreachable: {e}") from e
                    self._close_locked()

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
