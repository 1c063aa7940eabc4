"""The Docker engine as the docker backend uses it: connection, raw streams, labels, leftovers.

Connection: `docker.from_env()` (DOCKER_HOST, else the default socket). The engine must run on
this host: sandboxes bind-mount host folders (the workspace), and process streams use the
engine's Unix socket directly (`hijack`), because the SDK's own stream helpers can lose the
first bytes of a fast command's output in their HTTP buffer.

Labels: everything the backend creates (containers, networks) carries `ari.bench=1`, the
harness's pid and process start time (`ari.owner`), and the run id when one is set
(`ari.run`, see `owner_run`). `remove_leftovers()` removes what belongs to harnesses that are no
longer alive; `toolkit runs recover` and every `toolkit run` call it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

from toolkit.sandbox.base import SandboxError

LABEL = "ari.bench"
OWNER_LABEL = "ari.owner"
RUN_LABEL = "ari.run"
API_VERSION = "1.41"  # Docker 20.10, the oldest engine we test against (Debian 12's)
_run_lock = threading.Lock()
_run_id: str | None = None


def _process_start(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


def owner() -> str:
    """This process as an owner label: `pid:start` (a reused pid does not match)."""
    return f"{os.getpid()}:{_process_start(os.getpid())}"


def owner_alive(label: str) -> bool:
    pid, _, start = label.partition(":")
    return pid.isdigit() and _process_start(int(pid)) == start


@contextlib.contextmanager
def owner_run(run_id: str) -> Iterator[None]:
    """Label what is created meanwhile with `run_id` (one run per harness process)."""
    global _run_id
    with _run_lock:
        previous, _run_id = _run_id, run_id
    try:
        yield
    finally:
        with _run_lock:
            _run_id = previous


def labels(**extra: str) -> dict[str, str]:
    found = {LABEL: "1", OWNER_LABEL: owner(), **extra}
    with _run_lock:
        if _run_id is not None:
            found[RUN_LABEL] = _run_id
    return found


def socket_path() -> str:
    """The engine's Unix socket (DOCKER_HOST=unix://..., else the default)."""
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    url = urlparse(host)
    if url.scheme != "unix":
        raise SandboxError(
            f"DOCKER_HOST={host}: the docker backend needs an engine on this host, reached "
            "through its Unix socket (unix:///...): sandboxes bind-mount host folders"
        )
    return url.path


_clients: dict[str, Any] = {}
_client_lock = threading.Lock()


def connect() -> Any:
    """A client of the engine (shared); SandboxError with one clear line if there is none."""
    import docker
    import docker.errors

    path = socket_path()
    with _client_lock:
        if path in _clients:
            return _clients[path]
        if not os.path.exists(path):
            raise SandboxError(
                f"no Docker engine: {path} does not exist; start dockerd or set DOCKER_HOST"
            )
        try:
            client = docker.DockerClient(
                base_url=f"unix://{path}", version=API_VERSION, timeout=120
            )
            client.ping()
        except (docker.errors.DockerException, OSError) as exc:
            raise SandboxError(f"the Docker engine at {path} does not answer: {exc}") from exc
        _clients[path] = client
        return client


GPU_MODE_ENV = "ARI_DOCKER_GPUS"
"""`nvidia` or `cdi`: how containers ask the engine for GPUs, when the probe should not decide."""


def gpu_mode() -> str:
    """How this engine hands a container a GPU: "nvidia" where the NVIDIA container toolkit's
    hook is there (its `nvidia-container-cli`, or an engine with the `nvidia` runtime), else
    "cdi" where the engine reads CDI specs, else "nvidia" (the engine then says what is
    missing; `toolkit doctor --backend docker` names the fix). `ARI_DOCKER_GPUS` decides."""
    forced = os.environ.get(GPU_MODE_ENV, "")
    if forced in ("nvidia", "cdi"):
        return forced
    if shutil.which("nvidia-container-cli"):
        return "nvidia"
    try:
        info = connect().info()
    except (SandboxError, OSError):
        return "nvidia"
    if "nvidia" in (info.get("Runtimes") or {}):
        return "nvidia"
    return "cdi" if info.get("CDISpecDirs") else "nvidia"


def available() -> bool:
    """Whether an engine answers (for callers that only tidy up when there is one)."""
    try:
        connect()
    except SandboxError:
        return False
    return True


class Hijacked:
    """A raw, two-way stream to the engine (exec start or container attach), frames demuxed.

    Reading yields (stream, bytes) with stream 1 = stdout, 2 = stderr (the engine's 8-byte
    frame headers, without a TTY). Writing goes to the process's stdin; `close_input()` sends
    EOF while output keeps coming.
    """

    def __init__(self, path: str, body: dict[str, Any] | None) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(socket_path())
        data = json.dumps(body).encode() if body is not None else b""
        request = (
            f"POST /v{API_VERSION}{path} HTTP/1.1\r\nHost: docker\r\n"
            "Content-Type: application/json\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n"
            f"Content-Length: {len(data)}\r\n\r\n"
        ).encode() + data
        self.sock.sendall(request)
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise SandboxError(f"the Docker engine closed {path} without an answer")
            head += chunk
        head, self._buffer = head.split(b"\r\n\r\n", 1)
        status = head.split(b"\r\n", 1)[0].decode("latin-1")
        if " 101 " not in status and " 200 " not in status:
            self.sock.close()
            raise SandboxError(f"the Docker engine refused {path}: {status}")

    def _read_exact(self, size: int) -> bytes | None:
        while len(self._buffer) < size:
            try:
                chunk = self.sock.recv(1 << 20)
            except OSError:
                chunk = b""
            if not chunk:
                return None
            self._buffer += chunk
        data, self._buffer = self._buffer[:size], self._buffer[size:]
        return data

    def frames(self) -> Iterator[tuple[int, bytes]]:
        while True:
            header = self._read_exact(8)
            if header is None:
                return
            size = int.from_bytes(header[4:8], "big")
            data = self._read_exact(size) if size else b""
            if data is None:
                return
            yield header[0], data

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def close_input(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


def remove_leftovers(run_id: str | None = None) -> list[str]:
    """Remove containers and networks whose harness is gone (or, given, of one run).

    Returns the names removed. Does nothing (and says nothing) when no engine answers.
    """
    if not available():
        return []
    import docker.errors

    client = connect()
    removed: list[str] = []

    def doomed(found: dict[str, str]) -> bool:
        if run_id is not None:
            return found.get(RUN_LABEL) == run_id
        return not owner_alive(found.get(OWNER_LABEL, ""))

    for container in client.api.containers(all=True, filters={"label": LABEL}):
        if doomed(container.get("Labels") or {}):
            with contextlib.suppress(docker.errors.APIError):
                client.api.remove_container(container["Id"], force=True)
                removed.append(str(container["Names"][0]).lstrip("/"))
    for network in client.api.networks(filters={"label": LABEL}):
        if doomed(network.get("Labels") or {}):
            with contextlib.suppress(docker.errors.APIError):
                client.api.remove_network(network["Id"])
                removed.append(str(network["Name"]))
    return removed
