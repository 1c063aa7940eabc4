"""Fixtures for the docker backend's attack tests: a real engine (never a mock), small runs.

Every test here needs the engine (`docker_engine`, tests/conftest.py): outside CI a machine
without one skips them with the reason; with CI=true they fail.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.host_listener import host_listener
from tests.run.conftest import ShellAgent, SpecFactory, spec_factory, write_small_text
from tests.waiting import wait_for
from toolkit.agents.scripted import BASELINE_MODEL
from toolkit.images import current, pin
from toolkit.sandbox.docker import engine as docker_engine
from toolkit.sandbox.docker.egress import UPSTREAM_ENV, internal_network

REPO = Path(__file__).resolve().parents[2]
__all__ = ["ShellAgent", "SpecFactory"]


@pytest.fixture(autouse=True)
def engine(docker_engine: object) -> Iterator[object]:
    yield docker_engine
    pin(None)  # a command run in-process pinned its images: the next test starts afresh


@pytest.fixture(autouse=True)
def ari_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("ARI_HOME", str(home))
    return home


@pytest.fixture
def client(engine: object) -> Any:
    return docker_engine.connect()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP server on the host (all addresses) that answers b"host" to anyone connecting."""
    with host_listener("0.0.0.0") as port:
        yield port


# An HTTP server for the fake provider and the "other host": answers its own name and keeps a
# count of the requests it had (GET /count), so a test can prove a server was never reached.
SERVER = """
import http.server, sys
name, hits = sys.argv[1], [0]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path != "/count":
            hits[0] += 1
        body = (name + " " + str(hits[0]) + "\\n").encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body)))
        self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("0.0.0.0", 8080), H).serve_forever()
"""


# The start of a script run in a box that attacks another command of the same box, its victim
# (started with `victim_command`): waits up to 30 s (the victim's wrapper starts on its own time,
# however loaded the host) for the victims' wrappers, and leaves `victims`: (wrapper pid, call
# id) each, the id read from the wrapper's command line.
FIND_VICTIMS = r"""
import os, time
victims = []
until = time.monotonic() + 30
while not victims and time.monotonic() < until:
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if len(argv) > 3 and argv[1] == b"run" and argv[-2] == b"VICTIM":
            victims.append((int(pid), argv[2].decode()))
    time.sleep(0.05)
"""


def victim_command(done: str) -> list[str]:
    """A command that lives until the file `done` exists (the attack is over), then exits 7."""
    return ["sh", "-c", f"until [ -e {done} ]; do sleep 0.05; done; exit 7", "VICTIM"]


@dataclass
class Upstream:
    """The network beyond the forwarder: a fake provider and another host, both on it."""

    network: str
    provider: str  # host name of the fake provider (allowed)
    other: str  # host name of another server (never allowed)
    provider_ip: str
    other_ip: str
    client: Any

    def hits(self, container_ip: str) -> str:
        """Ask a server for its request count from a helper container on the network."""
        return run_on_network(self.client, self.network, f"http://{container_ip}:8080/count")


def run_on_network(client: Any, network: str, url: str) -> str:
    script = f"import urllib.request; print(urllib.request.urlopen({url!r}, timeout=5).read())"
    out = client.containers.run(
        current().proxy,
        ["python3", "-c", script],
        network=network,
        remove=True,
        labels=docker_engine.labels(),
    )
    return str(out.decode().strip())


def _wait_serving(client: Any, container: str, timeout: float = 60) -> None:
    """Until the server in `container` answers on its port (it starts on the host's time)."""
    url = "http://127.0.0.1:8080/count"
    probe = f"import urllib.request; urllib.request.urlopen({url!r}, timeout=5)"

    def answers() -> bool:
        run = client.api.exec_create(container, ["python3", "-c", probe], user="65534:65534")
        client.api.exec_start(run["Id"])
        return bool(client.api.exec_inspect(run["Id"])["ExitCode"] == 0)

    assert wait_for(answers, timeout), f"the server in {container[:12]} never answered"


@pytest.fixture
def upstream(client: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Upstream]:
    """An internal network holding a fake provider and another server (no outside access)."""
    tag = secrets.token_hex(3)
    network = f"ari-test-upstream-{tag}"
    internal_network(client, network)
    provider, other = f"provider-{tag}.test", f"other-{tag}.test"
    started = []
    try:
        ips = []
        for name in (provider, other):
            container = client.api.create_container(
                current().proxy,
                command=["python3", "-c", SERVER, name],
                user="65534:65534",
                labels=docker_engine.labels(),
                host_config=client.api.create_host_config(network_mode=network),
                networking_config=client.api.create_networking_config(
                    {network: client.api.create_endpoint_config(aliases=[name])}
                ),
            )
            started.append(container["Id"])
            client.api.start(container["Id"])
            info = client.api.inspect_container(container["Id"])
            ips.append(info["NetworkSettings"]["Networks"][network]["IPAddress"])
        for container in started:  # each server answers (asked from inside its container)
            _wait_serving(client, container)
        monkeypatch.setenv(UPSTREAM_ENV, network)
        yield Upstream(network, provider, other, ips[0], ips[1], client)
    finally:
        for container in started:
            client.api.remove_container(container, force=True)
        client.api.remove_network(network)


@pytest.fixture
def make_spec(tmp_path: Path) -> SpecFactory:
    """A docker RunSpec on the demo track with scaled-down times and small training data."""
    text = write_small_text(tmp_path)
    return spec_factory(tmp_path, text, backend="docker", model=BASELINE_MODEL)


def containers_of(client: Any, **label: str) -> list[dict[str, Any]]:
    filters = [f"{k}={v}" for k, v in label.items()] or ["ari.bench"]
    found: list[dict[str, Any]] = client.api.containers(all=True, filters={"label": filters})
    return found
