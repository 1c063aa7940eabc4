"""Crash safety: a run whose harness died is found and recorded as `invalid`, nothing lost.

While a run lasts, its harness folder holds a `RUNNING` marker: the harness's pid and process
start time (so a reused pid is not mistaken for it), where the result goes, and the result
skeleton (identity and effective config). It also lists the host pids of the sandbox launchers
it started (`pids`), because an agent whose harness was SIGKILLed would otherwise keep running
unsupervised. The audit log and the history are fsynced on every entry, so they are complete up
to the moment of the crash.

`recover_runs()` (called by `toolkit run` and `toolkit runs recover`) kills what is left of such
a run, writes its result as `invalid` with a reason and the candidates it had, and renames the
marker so it is handled once. Many processes may look at once (every run that starts, every
campaign task whose run process died, on hosts whose runs share one state folder): each run is
recovered under its own lock (`RECOVERING`), by exactly one of them, and the others wait for it
and find the marker gone; a marker that cannot be read costs its own run, never the others'.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import signal
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel

from toolkit.paths import state_dir
from toolkit.results.chain import ChainError, read_chain
from toolkit.results.model import InvalidEvidence, RunResult, save_run
from toolkit.run import journal
from toolkit.run.artifacts import file_hashes, list_artifacts
from toolkit.run.history import HISTORY_FILE, candidates_of, promoted_of
from toolkit.run.storage import reserve_path
from toolkit.sandbox import capped

MARKER = "RUNNING"
PIDS = "pids"
LOCK = "RECOVERING"
"""Held (flock) by the one process that recovers the run: it stays, empty, once done."""

log = logging.getLogger(__name__)


class Marker(BaseModel):
    pid: int
    pid_start: str | None
    results_dir: str
    artifacts: str
    skeleton: RunResult


def runs_root() -> Path:
    return state_dir() / "runs"


def process_start(pid: int) -> str | None:
    """The kernel's start time of `pid` (field 22 of /proc/PID/stat), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


def is_alive(pid: int, start: str | None) -> bool:
    now = process_start(pid)
    return now is not None and now == start


def write_marker(harness: Path, marker: Marker) -> None:
    """The crash marker, and (the first time) the run's line in the host's journal."""
    harness.mkdir(parents=True, exist_ok=True)
    first = not (harness / MARKER).exists()
    tmp = harness / f".{MARKER}.tmp"
    tmp.write_text(marker.model_dump_json(indent=2))
    os.replace(tmp, harness / MARKER)
    if first:
        s = marker.skeleton
        journal.append(
            journal.Entry(
                run_id=s.run_id,
                track=s.track,
                model=s.model,
                effort=s.effort,
                seed=s.seed,
                agent=s.agent,
                started_at=s.started_at,
                budget_s=s.timings.budget_s,
                harness=str(harness.resolve()),
                artifacts=marker.artifacts,
                results_dir=marker.results_dir,
            )
        )


def record_pid(harness: Path, pid: int) -> None:
    """Append a launcher pid (with its start time) for recovery to kill if the harness dies."""
    with (harness / PIDS).open("a") as f:
        f.write(f"{pid} {process_start(pid)}\n")


def clear_marker(harness: Path) -> None:
    (harness / MARKER).unlink(missing_ok=True)


def _in_workspace(pid: str, workspace: Path) -> bool:
    try:
        cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
    except OSError:
        return False
    return cwd == workspace or workspace in cwd.parents


def _kill_leftovers(harness: Path) -> int:
    """Kill what the dead harness left running: its launchers' process groups (a PID namespace
    dies with its first process), and any process still working in the run's workspace (which
    also catches a launcher started just before the harness died, not yet in `pids`)."""
    killed = 0
    try:
        lines = (harness / PIDS).read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        pid_text, _, start = line.partition(" ")
        pid = int(pid_text)
        if is_alive(pid, start):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            killed += 1
    workspace = (harness.parent / "workspace").resolve()
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid() and _in_workspace(entry, workspace):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(entry), signal.SIGKILL)
            killed += 1
    return killed


def recover_runs(root: Path | None = None) -> list[Path]:
    """Record every run whose harness is dead as `invalid`; return the result files written."""
    root = root or runs_root()
    written: list[Path] = []
    for path in sorted(root.glob(f"*/harness/{MARKER}")):
        try:
            out = _recover_locked(path.parent)
        except Exception as exc:  # one run's broken state (a lost engine...) stops no other's
            log.warning("recovery: %s could not be recovered: %s", path.parent.parent.name, exc)
            continue
        if out is not None:
            written.append(out)
    return written


def _recover_locked(harness: Path) -> Path | None:
    """Recover the run of `harness` if its harness is dead and nobody did it meanwhile."""
    try:
        fd = os.open(harness / LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        log.warning("recovery: cannot lock %s: %s", harness, exc)
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another process recovering it: wait, then look again
        try:
            marker = Marker.model_validate_json((harness / MARKER).read_bytes())
        except FileNotFoundError:
            return None  # recovered by another process, or the run just ended
        except (OSError, ValueError) as exc:
            log.warning("recovery: unreadable marker in %s: %s", harness, exc)
            return None
        if marker.pid != os.getpid() and is_alive(marker.pid, marker.pid_start):
            return None  # still running
        return _recover(harness, marker)
    finally:
        os.close(fd)  # the lock goes with it


def _remove_containers(run_id: str) -> int:
    """A docker run's containers and networks (labelled with its id): removed."""
    from toolkit.sandbox.docker.engine import remove_leftovers

    return len(remove_leftovers(run_id))


def _recover(harness: Path, marker: Marker) -> Path:
    killed = _kill_leftovers(harness)
    capped.release(harness.parent)  # the workspace's size cap: mount, loop device, image
    if marker.skeleton.config.backend == "docker":
        killed += _remove_containers(marker.skeleton.run_id)
    result = marker.skeleton.model_copy(deep=True)
    artifacts = Path(marker.artifacts)
    reserve_path(artifacts).unlink(missing_ok=True)  # the dead harness's room: the result's
    now = datetime.now(UTC)
    reason = (
        f"the harness (pid {marker.pid}) died during the run; found at {now:%Y-%m-%d %H:%M:%S} "
        f"UTC{f', {killed} leftover process trees killed' if killed else ''}: rerun"
    )
    try:
        entries = read_chain(artifacts / HISTORY_FILE)
        result.candidates = candidates_of(entries)
        result.promoted = promoted_of(entries)
    except ChainError as exc:
        reason += f"; the submission history is damaged: {exc}"
    # The skeleton was written before anything ran: list what the run left, all of it.
    result.artifacts = list_artifacts(artifacts, result.run_id)
    result.files = file_hashes(artifacts, result.run_id)
    result.status = "invalid"
    result.status_reason = reason
    result.evidence = InvalidEvidence(check="harness-died", detail=reason[:2000])
    result.finished_at = now
    result.timings.used_s = min(result.timings.budget_s, (now - result.started_at).total_seconds())
    out = save_run(result, Path(marker.results_dir))
    os.replace(harness / MARKER, harness / f"{MARKER}.recovered")
    return out


def load_marker(harness: Path) -> Marker:
    return Marker.model_validate(json.loads((harness / MARKER).read_text()))
