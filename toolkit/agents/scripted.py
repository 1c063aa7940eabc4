"""The `scripted` agent: no model, the baseline row, and the agent every test can use.

It does what the task brief asks in the plainest way a shell script can: read the brief, train
the starter as-is through `runner` for a share of the compute time left, submit the bundle,
promote it, stop. It runs in the controller like any agent, so it exercises the same path a
model-driven agent does (clock, runner, submit, promote, final grading).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from toolkit import __version__
from toolkit.agents.base import Agent, AgentContext, AgentOutcome

SCRIPT_NAME = "scripted-agent"
# The scripted agent uses no model: its row is named for what it is, the baseline.
BASELINE_MODEL = "scripted-baseline"

_SCRIPT = r"""#!/bin/sh
# The scripted agent (ARI Bench): no model. Train the starter as-is, submit, promote, stop.
set -u
SHARE_PCT=__SHARE__   # percent of the compute time left that training gets
RESERVED_S=__RESERVED__
PER_CALL_S=__PER_CALL__
SEED=__SEED__
say() { printf '[scripted] %s\n' "$*"; }

say "reading TASK.md ($(wc -l <TASK.md) lines)"
left=$(runner time_left) || { say "runner is not answering"; exit 1; }
train=$(( (left - RESERVED_S) * SHARE_PCT / 100 ))
cap=$(( PER_CALL_S * 75 / 100 ))   # the starter's export must fit in the call too
[ "$train" -gt "$cap" ] && train=$cap
if [ "$train" -lt 5 ]; then
    say "only ${left}s left: not enough time to train"
    exit 1
fi
say "training the starter for ${train}s of the ${left}s left"
runner python starter/train.py --data data --out bundles/scripted --budget-s "$train" \
    --seed "$SEED"__STEPS__ || say "training exited with status $?"
out=$(runner submit bundles/scripted)
status=$?
printf '%s\n' "$out"
id=$(printf '%s\n' "$out" | sed -n 's/^candidate \(c[0-9][0-9]*\).*/\1/p' | head -n 1)
if [ -z "$id" ]; then
    say "submit gave no candidate (status $status): nothing to promote"
    exit 1
fi
runner promote "$id"
runner history
say "done: promoted $id"
"""


class ScriptedAgent(Agent):
    """Trains the starter for `share` of the compute time, then submits and promotes."""

    name = "scripted"
    version = __version__

    def __init__(self, share: float = 0.75, max_steps: int | None = None) -> None:
        """`max_steps` also stops the training after that many steps (train.py's
        `--max-steps`): a test's run does a fixed amount of work, however busy the machine."""
        if not 0 < share <= 1:
            raise ValueError(f"share must be in (0, 1], got {share}")
        if max_steps is not None and max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {max_steps}")
        self.share = share
        self.max_steps = max_steps
        self._script = ""

    def render(self, ctx: AgentContext) -> str:
        return (
            _SCRIPT.replace("__SHARE__", str(round(self.share * 100)))
            .replace("__RESERVED__", str(round(ctx.reserved_s)))
            .replace("__PER_CALL__", str(int(ctx.per_call_limit_s)))
            .replace("__SEED__", str(ctx.seed))
            .replace("__STEPS__", f" --max-steps {self.max_steps}" if self.max_steps else "")
        )

    def prepare(self, workspace: Path, ctx: AgentContext) -> None:
        self._script = self.render(ctx)
        path = ctx.bin_dir / SCRIPT_NAME
        path.write_text(self._script, encoding="utf-8")
        path.chmod(0o755)

    def command(self) -> list[str]:
        return [SCRIPT_NAME]

    def config_sha256(self) -> str:
        return hashlib.sha256(self._script.encode()).hexdigest()

    def collect(self, workspace: Path, output: str) -> AgentOutcome:
        # No model: the console output is the whole transcript, and there is no usage.
        return AgentOutcome(transcript=output)
