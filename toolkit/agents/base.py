"""The agent adapter interface: what the harness needs from any agent scaffold.

An adapter prepares the scaffold's files for one run, says what to launch in the controller (a
shell with no Python and no GPU, at the workspace root), and afterwards turns what the scaffold
left behind into a transcript and token usage. The harness does everything else (clock, runner,
grading), so a new scaffold (opencode, next) plugs in here and touches nothing else.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from pathlib import Path

from toolkit.results import Usage


@dataclass(frozen=True)
class AgentContext:
    """What an adapter may know about the run it is prepared for."""

    model: str
    effort: str | None
    seed: int
    budget_s: float
    reserved_s: float
    per_call_limit_s: float
    bin_dir: Path
    """Folder on the controller's PATH (the `runner` client lives there); adapters may add to it."""


@dataclass
class AgentOutcome:
    """What the adapter collected after the run."""

    transcript: str
    usage: Usage = field(default_factory=Usage)


class Agent(abc.ABC):
    """One agent scaffold."""

    name: str
    version: str | None = None
    provider: str | None = None

    @abc.abstractmethod
    def prepare(self, workspace: Path, ctx: AgentContext) -> None:
        """Write whatever the scaffold needs before it starts (config, scripts)."""

    @abc.abstractmethod
    def command(self) -> list[str]:
        """The argv launched in the controller, at the workspace root."""

    def env(self) -> dict[str, str]:
        """Extra environment for the controller: the agent's own credentials, nothing else."""
        return {}

    def needs_network(self) -> bool:
        """Whether the controller needs network (a model API); the runner never has it."""
        return False

    @abc.abstractmethod
    def config_sha256(self) -> str:
        """Hash of the scaffold's per-run configuration (recorded in the effective config)."""

    @abc.abstractmethod
    def collect(self, workspace: Path, output: str) -> AgentOutcome:
        """Transcript and usage, from the scaffold's files and its console `output`."""
