"""Where the provider relay listens, per sandbox backend."""

from __future__ import annotations


def relay_bind(backend: str) -> str:
    """The address the relay listens on: the host's loopback for the local backend (its
    egress gate connects from the host)."""
    return "127.0.0.1"
