"""What defines a run (`RunSpec`, filled by the CLI from its options and the track), and the
names a run carries: its id and the toolkit's commit.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from toolkit.agents import Agent
from toolkit.run.workspace import STARTER_DIR
from toolkit.tracks.model import Track


@dataclass
class RunSpec:
    """Everything that defines a run (the CLI fills it from its options and the track)."""

    track: Track
    model: str
    seed: int
    agent: Agent
    exam: Path
    public_set: Path
    data_dir: Path
    results_dir: Path
    backend: str = "local"
    device: str = "cpu"
    effort: str | None = None
    budget_s: float | None = None  # None: the track's
    per_call_limit_s: float | None = None
    reserved_s: float | None = None
    run_id: str | None = None
    secrets: list[str] = field(default_factory=list)  # values that must never reach the agent
    bank_dirs: list[Path] = field(default_factory=list)  # banks to hide (public ones always)
    starter: Path = STARTER_DIR  # the starter folder handed to the agent (with its TASK.md)
    gpu: str | None = None  # pin the runner and grading to this GPU id; None: backend default
    cpus: float | None = None  # CPU quota (cores) of the runner and grading; None: the host's
    node: str | None = None  # where the run runs, for `placement` (default: the host name)
    image_digests: dict[str, str] | None = None  # docker: the digest of each role's image

    @property
    def budget(self) -> tuple[float, float, float]:
        t = self.track
        return (
            self.budget_s if self.budget_s is not None else t.budget_s,
            self.per_call_limit_s if self.per_call_limit_s is not None else t.per_call_limit_s,
            self.reserved_s if self.reserved_s is not None else t.reserved_s,
        )


def new_run_id(model: str, seed: int) -> str:
    slug = "".join(c if c.isalnum() or c in "._-" else "-" for c in model)[:40] or "model"
    return f"{datetime.now(UTC):%Y%m%dT%H%M%S}-{slug}-s{seed}-{secrets.token_hex(2)}"


def git_commit() -> str | None:
    repo = Path(__file__).resolve().parent.parent.parent
    if not (repo / ".git").exists():
        return None
    try:
        head = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


# Environment variables whose values must never reach the agent's workspace (checked there).
SECRET_ENV_SUFFIXES = ("_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD")


def env_secrets() -> list[str]:
    """Values in this process's environment that must never reach the agent: keys, tokens."""
    return [v for k, v in os.environ.items() if k.endswith(SECRET_ENV_SUFFIXES) and v]


def scaled_budget(track: Track, budget_s: float | None) -> tuple[float | None, ...]:
    """(budget, per-call, reserved) for a demo budget override, the last two scaled with it;
    (None, None, None) keeps the track's."""
    if budget_s is None:
        return (None, None, None)
    scale = budget_s / track.budget_s
    return (budget_s, min(budget_s, track.per_call_limit_s * scale), track.reserved_s * scale)


def budget_override_note(track: Track, budget_s: float | None) -> str | None:
    """What a budget override means for the board, said when the run starts (None: the
    track's own budget): a run off the track's rules is listed apart, never averaged."""
    if budget_s is None or budget_s == track.budget_s:
        return None
    return (
        f"--budget {budget_s:g} s is not track '{track.id}''s {track.budget_s:g} s: this run "
        "is off the track's rules and will never be counted in a row's mean (the board lists "
        "it apart); leave --budget out for a run that counts"
    )
