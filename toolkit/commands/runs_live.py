"""`toolkit runs list / show / tail / kill`: the runs of this host, live and finished.

Runs are found through the host's journal (`toolkit.run.journal`), whatever results folder
they wrote to. A run is *running* while its harness's crash marker names a live process,
*interrupted* when that process died without recording it, and otherwise whatever its result
file says. `runs list` and `runs show` record an interrupted run `invalid` first (as `toolkit
run` and `toolkit runs recover` do), so what they show is what the results folder will say.
"""

from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import click
from rich.table import Table

from toolkit.commands.console import make_console
from toolkit.commands.runs import runs_group
from toolkit.paths import state_dir
from toolkit.results.model import ResultsError, RunResult, load_run
from toolkit.results.summary import print_result
from toolkit.run import journal, recovery
from toolkit.run.artifacts import AGENT_LOG, AUDIT_FILE

KILL_WAIT_S = 120.0  # a killed run stops, records itself and exits in this time
FOLLOW_POLL_S = 0.5


@dataclass
class State:
    entry: journal.Entry
    state: str
    """running, interrupted, valid, failed, invalid, or missing (the result file is gone)."""
    pid: int | None = None
    result: RunResult | None = None


def state_of(entry: journal.Entry) -> State:
    marker = Path(entry.harness) / recovery.MARKER
    if marker.is_file():
        try:
            m = recovery.load_marker(Path(entry.harness))
        except (OSError, ValueError):
            return State(entry, "interrupted")
        if recovery.is_alive(m.pid, m.pid_start):
            return State(entry, "running", pid=m.pid)
        return State(entry, "interrupted")
    try:
        result = load_run(entry.result_path)
    except (OSError, ResultsError):
        return State(entry, "missing")
    return State(entry, result.status, result=result)


def _label(e: journal.Entry) -> str:
    return f"{e.model} ({e.effort})" if e.effort else e.model


def _clock(s: State) -> str:
    if s.result is not None:
        return f"{s.result.timings.used_s:.0f}/{s.result.timings.budget_s:.0f}s"
    elapsed = (datetime.now(UTC) - s.entry.started_at).total_seconds()
    if s.state == "running":
        left = max(0.0, s.entry.budget_s - elapsed)
        return f"{elapsed:.0f}/{s.entry.budget_s:.0f}s ({left:.0f}s left)"
    return ""


def _recover_dead() -> None:
    """Check the state folder can be read, then record runs whose harness died (kill -9) as
    invalid, saying so on stderr: a listing never shows "interrupted" with a blank clock."""
    try:
        state_dir()
    except OSError as exc:
        where = os.environ.get("ARI_HOME") or "~/.cache/ari-bench"
        raise click.ClickException(
            f"cannot read this host's runs in the state folder {where} ({exc.strerror or exc}); "
            "set ARI_HOME to the folder your runs used, or unset it for ~/.cache/ari-bench"
        ) from None
    for path in recovery.recover_runs():
        make_console(stderr=True).print(f"recorded an interrupted run as invalid: {path}")


def _score(s: State) -> str:
    """The score column: none for an invalid run (it never scores, not even 0%)."""
    if s.result is None or s.result.status == "invalid":
        return "—"
    return f"{s.result.score.percent:.1f}%"


def _find(run_id: str) -> State:
    _recover_dead()
    try:
        return state_of(journal.find(run_id))
    except LookupError as exc:
        raise click.ClickException(str(exc)) from None


@runs_group.command("list")
@click.option("--all", "show_all", is_flag=True, help="Every run, not only the latest 20.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per run, for tools.")
def list_command(show_all: bool, as_json: bool) -> None:
    """The runs of this host, newest first: running, finished and interrupted.

    \b
    Example:
      toolkit runs list
      toolkit runs list --all --json | jq 'select(.state == "running")'
    """
    _recover_dead()
    states = [state_of(e) for e in journal.entries()]
    states = states if show_all else states[:20]
    if as_json:
        for s in states:
            record = {**s.entry.model_dump(mode="json"), "state": s.state, "pid": s.pid}
            if s.result is not None and s.result.status != "invalid":
                record["score"] = s.result.score.percent
            click.echo(json.dumps(record))
        return
    table = Table(header_style="bold")
    for column in ("run", "track", "model", "seed", "state", "clock", "score"):
        table.add_column(column)
    colours = {"running": "cyan", "valid": "green", "failed": "yellow"}
    for s in states:
        colour = colours.get(s.state, "red")
        table.add_row(
            s.entry.run_id,
            s.entry.track,
            _label(s.entry),
            str(s.entry.seed),
            f"[{colour}]{s.state}[/{colour}]",
            _clock(s),
            _score(s),
        )
    console = make_console()
    if not states:
        console.print("no runs on this host yet (`toolkit run` starts one)")
        return
    console.print(table)


@runs_group.command("show")
@click.argument("run_id")
def show_command(run_id: str) -> None:
    """One run: its state and, once it is over, its result.

    \b
    Example:
      toolkit runs show 20261125T140102-scripted-baseline-s0-4712
    """
    s = _find(run_id)
    e = s.entry
    console = make_console()
    console.print(f"run {e.run_id} · track {e.track} · {_label(e)} · seed {e.seed} · {e.agent}")
    console.print(f"state: {s.state}{f' (pid {s.pid})' if s.pid else ''} · clock {_clock(s)}")
    console.print(f"artifacts: {e.artifacts}")
    if s.result is not None:
        print_result(s.result, e.result_path, console)
    elif s.state == "interrupted":
        console.print("its harness died: `toolkit runs recover` records it invalid")


def _audit_line(line: str) -> str | None:
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    argv = entry.get("argv") or []
    shown = " ".join(a if isinstance(a, str) else "<binary>" for a in argv)[:200]
    code = entry.get("exit_code")
    return f"[{entry.get('start_s', 0):7.1f}s] runner {shown} -> exit {code}"


class _Follower:
    """New complete lines of a file, from where it was last read."""

    def __init__(self, path: Path, start_at_end_minus: int) -> None:
        self.path, self.offset, self.partial = path, 0, b""
        try:
            size = path.stat().st_size
            self.offset = max(0, size - start_at_end_minus)
        except OSError:
            pass

    def lines(self) -> list[str]:
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                data = f.read(1 << 20)
        except OSError:
            return []
        self.offset += len(data)
        data = self.partial + data
        *done, self.partial = data.split(b"\n")
        return [d.decode("utf-8", "replace") for d in done]


@runs_group.command("tail")
@click.argument("run_id")
@click.option("-f", "--follow", is_flag=True, help="Keep printing until the run ends.")
@click.option("--bytes", "tail_bytes", default=8192, show_default=True, help="How far back.")
def tail_command(run_id: str, follow: bool, tail_bytes: int) -> None:
    """A run's harness log (agent.log) and its runner calls, as they come.

    \b
    Example:
      toolkit runs tail -f 20261125T140102-scripted-baseline-s0-4712
    """
    s = _find(run_id)
    artifacts = Path(s.entry.artifacts)
    log = _Follower(artifacts / AGENT_LOG, tail_bytes)
    audit = _Follower(artifacts / AUDIT_FILE, tail_bytes)
    if audit.offset:
        audit.lines()  # drop the first, partial line
    while True:
        for line in log.lines():
            click.echo(line)
        for line in audit.lines():
            shown = _audit_line(line)
            if shown is not None:
                click.echo(shown)
        if not follow or state_of(s.entry).state != "running":
            return
        time.sleep(FOLLOW_POLL_S)


@runs_group.command("kill")
@click.argument("run_id")
def kill_command(run_id: str) -> None:
    """Stop a running run: it is recorded `invalid`, "interrupted by the operator".

    \b
    Example:
      toolkit runs kill 20261125T140102-scripted-baseline-s0-4712
    """
    s = _find(run_id)
    console = make_console()
    if s.state == "interrupted":
        for path in recovery.recover_runs():
            console.print(f"recorded as invalid: {path}")
        return
    if s.state != "running" or s.pid is None:
        raise click.ClickException(f"run {s.entry.run_id} is not running (it is {s.state})")
    stop = Path(s.entry.harness) / journal.STOP_FILE
    stop.write_text("the operator: toolkit runs kill\n", encoding="utf-8")
    os.kill(s.pid, signal.SIGTERM)
    deadline = time.monotonic() + KILL_WAIT_S
    while state_of(s.entry).state == "running":
        if time.monotonic() > deadline:
            raise click.ClickException(
                f"run {s.entry.run_id} (pid {s.pid}) has not stopped after {KILL_WAIT_S:.0f}s"
            )
        time.sleep(0.2)
    done = state_of(s.entry)
    if done.result is not None:
        print_result(done.result, s.entry.result_path, console)
    else:
        console.print(f"run {s.entry.run_id} stopped ({done.state})")
