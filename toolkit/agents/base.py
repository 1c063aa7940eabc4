"""The agent adapter interface: what the harness needs from any agent scaffold.

An adapter prepares the scaffold's files for one run, says what to launch in the controller (a
shell with no Python and no GPU, at the workspace root), and afterwards turns what the scaffold
left behind into a transcript and token usage. The harness does everything else (clock, runner,
grading), so a new scaffold plugs in here and touches nothing else.

Hooks with defaults, for scaffolds that talk to a model provider (opencode): `egress` (the
destinations the controller may reach), `secrets` (values that must never reach the workspace
or a published file), `console` / `observe` (where the console goes, what of it to echo, and a
look at each line as it comes), `problem` / `final_problem` (an infrastructure failure seen
while it runs, or once it stopped: the run then ends `invalid`; only evidence from outside the
controller may decide it), `finish` (a last command in the controller after the agent stopped,
e.g. exporting its session; files it writes into the run folder are listed with the run),
`close` (host-side helpers the adapter started, such as a provider relay, are stopped).
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from toolkit.results.model import Usage
from toolkit.sandbox import Egress, Sandbox

TRANSCRIPT_FILE = "transcript.txt"


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
    home_dir: Path | None = None
    """A fresh folder only the controller sees (hidden from the runner), for the scaffold's
    HOME, configuration and state; None where the harness gives none."""
    artifacts: Path | None = None
    """The run folder (hidden from every sandbox): where host-side records of the adapter go
    (the provider relay's log); None where the harness gives none."""
    backend: str = "local"
    """The sandbox backend of the run (where a host-side helper must listen depends on it)."""
    log: Callable[[str], None] | None = None
    """Writes one line to the harness's `agent.log` (the adapter's notes: a spent budget)."""


@dataclass
class AgentOutcome:
    """What the adapter collected after the run."""

    transcript: str | None
    """The transcript text to keep as `transcript.txt`; None: the adapter wrote its own."""
    usage: Usage = field(default_factory=Usage)


class Agent(abc.ABC):
    """One agent scaffold."""

    name: str
    version: str | None = None
    provider: str | None = None

    @classmethod
    def for_run(cls, **options: object) -> Agent:
        """An adapter for one run, from the run's options (model, effort, provider, ...); an
        agent that needs none of them ignores them. Raises `AgentSetupError`-like errors
        (RuntimeError / ValueError) with one line for the operator."""
        return cls()

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

    def egress(self) -> list[Egress]:
        """Destinations the controller may reach without network (its model provider)."""
        return []

    def isolation(self) -> list[str]:
        """Words the adapter adds to the run's `isolation` (what it keeps from the controller,
        e.g. `controller:provider-relay`); asked once the adapter is prepared."""
        return []

    def secrets(self) -> list[str]:
        """Values (a credential) checked out of the workspace and redacted from run files."""
        return []

    def console(self) -> tuple[str, str]:
        """Run-folder files that get the agent's stdout and stderr as they come."""
        return TRANSCRIPT_FILE, TRANSCRIPT_FILE

    def observe(self, stream: str, line: str) -> str | None:
        """Look at one console line ("stdout" or "stderr") as it comes; return what to echo to
        the operator (None: nothing). Called from the harness's reader threads."""
        return line

    def problem(self) -> str | None:
        """An infrastructure failure seen so far (provider down, rate limit stalling the run):
        polled while the agent runs; the run then ends `invalid` with it. Never decided from
        what the controller says (the agent could forge it: a free rerun)."""
        return None

    def preflight(self) -> str | None:
        """Before the clock starts: whether the agent's model can be reached at all (one tiny
        request of the harness's own); the problem in one line, or None. Adapters without a
        provider have nothing to check."""
        return None

    def final_problem(self, exited: bool) -> str | None:
        """Once the agent stopped and the sandboxes are gone: an infrastructure failure, if any
        (`exited`: the agent exited by itself, not killed at the deadline)."""
        return self.problem()

    def close(self) -> None:
        """The run is over (or never started): stop what the adapter started on the host."""
        return None

    def finish(self, controller: Sandbox, artifacts: Path) -> None:
        """After the agent stopped (exited or killed), before the sandboxes go: last commands
        in the controller, files into the run folder `artifacts`. Failures are the adapter's
        to log; they must not lose the run."""
        return None

    @abc.abstractmethod
    def config_sha256(self) -> str:
        """Hash of the scaffold's per-run configuration (recorded in the effective config)."""

    @abc.abstractmethod
    def collect(self, workspace: Path, output: str) -> AgentOutcome:
        """Transcript and usage, from the scaffold's files and its console `output`."""
