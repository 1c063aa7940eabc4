"""A TCP server on the host that answers b"host" to anyone who connects: what a sandbox must
not reach (tests/sandbox on 127.0.0.1, tests/docker on every address)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def host_listener(address: str) -> Iterator[int]:
    """Serve on `address` (a free port) until the block ends; yields the port."""
    server = socket.socket()
    server.bind((address, 0))
    server.listen()
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(b"host")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        server.close()
