"""A tiny headless-Chromium driver over the DevTools protocol, with the standard library only.

The browser test needs to click a link, read the console and take a screenshot; Chromium's
`--dump-dom` cannot do the first two. The DevTools protocol speaks JSON over a websocket, and a
client websocket (RFC 6455: handshake, masked text frames out, plain frames in) is ~60 lines,
so we carry it here instead of adding a dependency.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-port=0",
]


class BrowserUnavailable(RuntimeError):
    """Chromium is missing or does not start here (the test skips saying why; fails in CI)."""


class _WebSocket:
    def __init__(self, url: str, timeout: float) -> None:
        u = urlparse(url)
        self.sock = socket.create_connection((u.hostname, u.port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        request = (
            f"GET {u.path} HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        self.sock.sendall(request.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(1)
            if not chunk:
                raise ConnectionError("websocket handshake: connection closed")
            head += chunk
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise ConnectionError(f"websocket handshake refused: {head[:80]!r}")

    def _exact(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("websocket closed")
            data += chunk
        return data

    def send(self, text: str) -> None:
        payload = text.encode()
        n = len(payload)
        if n < 126:
            header = bytes([0x81, 0x80 | n])
        elif n < 1 << 16:
            header = bytes([0x81, 0x80 | 126]) + n.to_bytes(2, "big")
        else:
            header = bytes([0x81, 0x80 | 127]) + n.to_bytes(8, "big")
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def recv(self) -> str:
        message = b""
        while True:
            b0, b1 = self._exact(2)
            n = b1 & 0x7F
            if n == 126:
                n = int.from_bytes(self._exact(2), "big")
            elif n == 127:
                n = int.from_bytes(self._exact(8), "big")
            payload = self._exact(n)
            opcode = b0 & 0x0F
            if opcode == 0x8:
                raise ConnectionError("websocket closed by the browser")
            if opcode == 0x9:  # ping: answer with a pong carrying the same data
                self.sock.sendall(bytes([0x8A, 0x80 | len(payload)]) + b"\0\0\0\0" + payload)
                continue
            message += payload
            if b0 & 0x80:  # FIN
                return message.decode()

    def close(self) -> None:
        self.sock.close()


class Browser:
    """One headless Chromium with one page, driven over the DevTools protocol."""

    def __init__(self, binary: str = "chromium", timeout: float = 60) -> None:
        path = shutil.which(binary)
        if path is None:
            raise BrowserUnavailable(f"{binary} not found (scripts/test-setup.sh installs it)")
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="ari-chromium-")
        # Chromium's chatter goes to a file: an unread pipe would fill up and stall it.
        self.log = Path(self.profile + ".log")
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [path, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while not port_file.exists() or not port_file.read_text().strip():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                tail = self.log.read_text(errors="replace")[-400:].strip()
                raise BrowserUnavailable(f"chromium did not start: {tail}")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=timeout) as r:
            targets = json.load(r)
        page = next(t for t in targets if t["type"] == "page")
        self.ws = _WebSocket(page["webSocketDebuggerUrl"], timeout)
        self.events: list[dict[str, Any]] = []
        self._next = 0

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one command and return its result (events seen meanwhile are kept)."""
        self._next += 1
        self.ws.send(json.dumps({"id": self._next, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self._next:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                result: dict[str, Any] = msg.get("result", {})
                return result
            self.events.append(msg)

    def wait_for(self, event: str) -> dict[str, Any]:
        """Wait for the next event named `event` (earlier events are kept too)."""
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            msg = json.loads(self.ws.recv())
            self.events.append(msg)
            if msg.get("method") == event:
                return msg
        raise TimeoutError(event)

    def evaluate(self, expression: str) -> Any:
        """Evaluate JavaScript in the page and return its JSON value."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and failed loads seen so far."""
        found = []
        for e in self.events:
            method, params = e.get("method"), e.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append(json.dumps(params.get("args"))[:300])
            elif method == "Runtime.exceptionThrown":
                found.append(json.dumps(params.get("exceptionDetails"))[:300])
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                found.append(f"{params['entry'].get('text')} {params['entry'].get('url', '')}")
        return found

    def close(self) -> None:
        if getattr(self, "ws", None) is not None:
            self.ws.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)
        self.log.unlink(missing_ok=True)
