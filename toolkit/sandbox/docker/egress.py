"""Egress of a Docker sandbox: an internal network whose only way out is a forwarder container.

For a sandbox created with `egress=[Egress(host, port), ...]`:

- a network of its own, `internal` and with `inhibit_ipv4` (the Linux bridge gets no address, so
  the host itself is unreachable from it too: an internal bridge alone still reaches the
  host's services through its gateway, and without the engine's iptables rules, everything);
- one forwarder container per allowed host (proxy image, `egress.py`), on that network and on
  the upstream network (`ARI_DOCKER_EGRESS_NETWORK`, default `ari-egress`, a plain bridge the
  engine routes out of). It listens on the host's allowed ports and relays each connection to
  exactly that (host, port): a TCP relay, not an HTTP proxy, so no request can name another
  destination, and the client's TLS runs end to end;
- the sandbox's `/etc/hosts` maps each allowed host to its forwarder (`extra_hosts`), so that
  programs connect to `host:port` as usual. Other names do not resolve to anything reachable.
  A rule with an `address` gets it in the forwarder's own `/etc/hosts` for `host` (a service
  of the harness's on the upstream network's gateway: the provider relay).

Why a relay and not squid/tinyproxy: it needs no proxy support in the client (opencode's HTTP
client, curl, Python all just connect), and it gives the same contract as the local backend's
loopback listener, so the conformance suite tests both the same way.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from collections.abc import Sequence
from typing import Any

from toolkit.sandbox.base import Egress, SandboxError
from toolkit.sandbox.docker.engine import labels

UPSTREAM_ENV = "ARI_DOCKER_EGRESS_NETWORK"
DEFAULT_UPSTREAM = "ari-egress"
FORWARDER = "/usr/local/lib/ari/egress.py"
FORWARDER_MEMORY = 128 * 2**20


def internal_network(client: Any, name: str, *, internal: bool = True) -> str:
    """Create a bridge network without a host address; return its id."""
    created = client.api.create_network(
        name,
        driver="bridge",
        internal=internal,
        options={"com.docker.network.bridge.inhibit_ipv4": "true"} if internal else None,
        labels=labels(),
    )
    return str(created["Id"])


def upstream_network(client: Any) -> str:
    """The network forwarders reach providers through (created as a plain bridge if absent)."""
    import docker.errors

    name = os.environ.get(UPSTREAM_ENV, DEFAULT_UPSTREAM)
    try:
        client.api.inspect_network(name)
    except docker.errors.NotFound:
        if name != DEFAULT_UPSTREAM:
            raise SandboxError(
                f"{UPSTREAM_ENV}={name}: no such Docker network; create it or unset it"
            ) from None
        with contextlib.suppress(docker.errors.APIError):  # another sandbox made it first
            client.api.create_network(name, driver="bridge", labels={"ari.bench": "1"})
    return name


class EgressGate:
    """The network and forwarders of one sandbox; `hosts` maps each allowed host to an IP."""

    def __init__(self, client: Any, image: str, egress: Sequence[Egress], prefix: str) -> None:
        self.client = client
        self.network = f"{prefix}-net"
        self.containers: list[str] = []
        self.hosts: dict[str, str] = {}
        by_host: dict[str, list[int]] = {}
        addresses: dict[str, str] = {}  # a host the forwarder reaches at a given address
        for rule in egress:
            by_host.setdefault(rule.host, [])
            if rule.port not in by_host[rule.host]:
                by_host[rule.host].append(rule.port)
            if rule.address:
                addresses[rule.host] = rule.address
        internal_network(client, self.network)
        try:
            upstream = upstream_network(client)
            for host, ports in by_host.items():
                self._forwarder(image, host, ports, upstream, prefix, addresses.get(host))
        except BaseException:
            self.remove()
            raise

    def _forwarder(
        self,
        image: str,
        host: str,
        ports: list[int],
        upstream: str,
        prefix: str,
        address: str | None = None,
    ) -> None:
        api = self.client.api
        name = f"{prefix}-egress-{secrets.token_hex(3)}"
        config = api.create_host_config(
            network_mode=self.network,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            read_only=True,
            mem_limit=FORWARDER_MEMORY,
            memswap_limit=FORWARDER_MEMORY,
            pids_limit=256,
            # Ports below 1024 without root: the engine's default for a container's own
            # network namespace from Docker 20.10 on, set explicitly for older ones.
            sysctls={"net.ipv4.ip_unprivileged_port_start": "0"},
            extra_hosts={host: address} if address else None,  # `Egress.address`
        )
        container = api.create_container(
            image,
            command=["python3", "-u", FORWARDER, *(f"{host}:{port}" for port in ports)],
            user="65534:65534",
            name=name,
            host_config=config,
            labels=labels(**{"ari.role": "egress"}),
        )
        self.containers.append(container["Id"])
        api.connect_container_to_network(container["Id"], upstream)
        api.start(container["Id"])
        details = api.inspect_container(container["Id"])
        address = details["NetworkSettings"]["Networks"][self.network]["IPAddress"]
        if not address:
            raise SandboxError(f"the egress forwarder for {host} got no address")
        self.hosts[host] = address
        self._await_ready(container["Id"])

    def _await_ready(self, container: str) -> None:
        import time

        end = time.monotonic() + 30
        while time.monotonic() < end:
            logs = self.client.api.logs(container, stdout=True, stderr=True)
            if b'"ready"' in logs:
                return
            state = self.client.api.inspect_container(container)["State"]
            if not state.get("Running"):
                tail = logs.decode(errors="replace").strip()[-300:]
                raise SandboxError(f"the egress forwarder stopped at start: {tail}")
            time.sleep(0.05)
        raise SandboxError("the egress forwarder did not start within 30 s")

    def log(self) -> list[dict[str, Any]]:
        """Every connection attempt the forwarders saw, oldest first."""
        entries: list[dict[str, Any]] = []
        for container in self.containers:
            with contextlib.suppress(Exception):
                raw = self.client.api.logs(container, stdout=True, stderr=False)
                for line in raw.decode(errors="replace").splitlines():
                    with contextlib.suppress(ValueError):
                        entry = json.loads(line)
                        if isinstance(entry, dict) and entry.get("event") != "ready":
                            entries.append(entry)
        attempts = [e for e in entries if e.get("event") != "close"]
        return sorted(attempts, key=lambda e: str(e.get("time", "")))

    def remove(self) -> None:
        for container in self.containers:
            with contextlib.suppress(Exception):
                self.client.api.remove_container(container, force=True)
        self.containers = []
        with contextlib.suppress(Exception):
            self.client.api.remove_network(self.network)
