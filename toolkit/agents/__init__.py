"""Agent adapters by name: `scripted` (no model, the baseline) and `opencode` (a real model)."""

from __future__ import annotations

from toolkit.agents.base import Agent, AgentContext, AgentOutcome
from toolkit.agents.opencode import AgentSetupError, OpencodeAgent
from toolkit.agents.scripted import ScriptedAgent

AGENTS: dict[str, type[Agent]] = {"scripted": ScriptedAgent, "opencode": OpencodeAgent}


def get_agent(name: str, **options: object) -> Agent:
    """A fresh adapter by name, for a run with `options` (model, effort, provider, ...);
    `ValueError` listing the known names for an unknown one, `AgentSetupError` when the
    agent cannot run as asked (no key, scaffold missing, ...)."""
    if name not in AGENTS:
        raise ValueError(f"unknown agent '{name}' (known: {', '.join(sorted(AGENTS))})")
    return AGENTS[name].for_run(**options)


__all__ = [
    "AGENTS",
    "Agent",
    "AgentContext",
    "AgentOutcome",
    "AgentSetupError",
    "OpencodeAgent",
    "ScriptedAgent",
    "get_agent",
]
