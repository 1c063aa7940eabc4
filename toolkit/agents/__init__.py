"""Agent adapters by name. `scripted` is built in; `opencode` arrives with its own issue."""

from __future__ import annotations

from toolkit.agents.base import Agent, AgentContext, AgentOutcome
from toolkit.agents.scripted import ScriptedAgent

AGENTS: dict[str, type[Agent]] = {"scripted": ScriptedAgent}


def get_agent(name: str) -> Agent:
    """A fresh adapter by name; `ValueError` listing the known names otherwise."""
    if name not in AGENTS:
        raise ValueError(f"unknown agent '{name}' (known: {', '.join(sorted(AGENTS))})")
    return AGENTS[name]()


__all__ = ["AGENTS", "Agent", "AgentContext", "AgentOutcome", "ScriptedAgent", "get_agent"]
