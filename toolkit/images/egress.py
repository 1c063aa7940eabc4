"""The egress forwarder of a Docker sandbox: the controller's only way out.

Runs in the proxy container, which sits on two networks: the sandbox's internal network (where
the controller's /etc/hosts points the provider's host name at this container) and the network
that leads to the provider. For each allowed (host, port) it listens on that port and relays
every connection, byte for byte, to exactly that (host, port): the client's own TLS goes end to
end, and no request can name another destination (this is not an HTTP proxy). Every attempt is
one JSON line on stdout: time (ISO 8601, UTC), host, port, protocol, allowed, error, client;
and, when it closes, the bytes each way.

Usage: python3 egress.py HOST:PORT [HOST:PORT ...]   (standard library only)
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
import time
from datetime import UTC, datetime

CONNECT_TIMEOUT_S = 10.0
_print_lock = threading.Lock()


def log(**entry: object) -> None:
    now = datetime.now(UTC).isoformat(timespec="milliseconds")
    entry = {"time": now, "protocol": "tcp", **entry}
    with _print_lock:
        sys.stdout.write(json.dumps(entry, sort_keys=True) + "\n")
        sys.stdout.flush()


def pump(src: socket.socket, dst: socket.socket, counts: dict[str, int], key: str) -> None:
    try:
        while chunk := src.recv(65536):
            dst.sendall(chunk)
            counts[key] += len(chunk)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


def relay(client: socket.socket, peer: str, host: str, port: int) -> None:
    counts = {"sent": 0, "received": 0}
    try:
        upstream = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S)
    except OSError as exc:
        log(host=host, port=port, allowed=True, error=f"{type(exc).__name__}: {exc}", client=peer)
        client.close()
        return
    upstream.settimeout(None)
    log(host=host, port=port, allowed=True, error=None, client=peer, event="open")
    back = threading.Thread(target=pump, args=(upstream, client, counts, "received"), daemon=True)
    back.start()
    pump(client, upstream, counts, "sent")
    back.join()
    client.close()
    upstream.close()
    log(host=host, port=port, allowed=True, error=None, client=peer, event="close", **counts)


def serve(host: str, port: int) -> None:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("0.0.0.0", port))
    server.listen(128)
    while True:
        client, address = server.accept()
        peer = f"{address[0]}:{address[1]}"
        threading.Thread(target=relay, args=(client, peer, host, port), daemon=True).start()


def main(targets: list[str]) -> None:
    pairs = []
    for target in targets:
        host, _, number = target.rpartition(":")
        if not host or not number.isdigit():
            sys.exit(f"egress: bad target {target!r}: want HOST:PORT")
        pairs.append((host, int(number)))
    for host, port in pairs:
        threading.Thread(target=serve, args=(host, port), daemon=True).start()
    log(event="ready", allowed=True, host=None, port=None, error=None, targets=targets)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main(sys.argv[1:])
