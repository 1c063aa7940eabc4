"""Where the provider relay listens, and the name the controller reaches it by, per backend.

- local: the host's loopback. The local egress gate connects from the host, and an IP address
  stays itself inside the sandbox, so the controller uses `127.0.0.1:PORT` too.
- docker: the controller's only way out is its egress forwarder container, which sits on the
  upstream network (`upstream_network` of the docker backend's `egress.py`,
  `ARI_DOCKER_EGRESS_NETWORK`). The host has an address on that bridge (its gateway), so the
  relay listens there; the controller reaches it under the name `RELAY_HOST` (its /etc/hosts
  points the name at the forwarder, and the forwarder's at the gateway: `Egress.address`). The
  key stays in the harness process on the host, as with the local backend; nothing but
  forwarders is on that network.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from toolkit.sandbox import Egress

RELAY_HOST = "ari-provider-relay"
INHIBIT = "com.docker.network.bridge.inhibit_ipv4"


class RelayPlacementError(RuntimeError):
    """The relay cannot be placed where the controller reaches it; one line for the operator."""


@dataclass(frozen=True)
class RelayEndpoint:
    bind: str
    """The host address the relay listens on."""
    host: str
    """The name (or address) the controller uses for the relay."""
    address: str | None = None
    """Where the egress gate connects for `host` (`Egress.address`); None: `host` itself."""

    def egress(self, port: int) -> Egress:
        return Egress(self.host, port, address=self.address)


LOCAL = RelayEndpoint("127.0.0.1", "127.0.0.1")


def relay_endpoint(backend: str) -> RelayEndpoint:
    """Where the run's relay goes, for `backend`."""
    if backend != "docker":
        return LOCAL
    from toolkit.sandbox.docker.egress import UPSTREAM_ENV, upstream_network
    from toolkit.sandbox.docker.engine import connect

    client = connect()
    network = upstream_network(client)
    info = client.api.inspect_network(network)
    gateways = []
    for config in (info.get("IPAM") or {}).get("Config") or []:
        gateway = str(config.get("Gateway") or "")
        if gateway and ipaddress.ip_address(gateway).version == 4:
            gateways.append(gateway)
    if not gateways or (info.get("Options") or {}).get(INHIBIT) == "true":
        raise RelayPlacementError(
            f"Docker network '{network}' gives the host no address, so the provider relay "
            f"cannot listen where the egress forwarder reaches it: use a bridge network with a "
            f"gateway ({UPSTREAM_ENV}=NAME, or unset it for the default)"
        )
    return RelayEndpoint(gateways[0], RELAY_HOST, gateways[0])
