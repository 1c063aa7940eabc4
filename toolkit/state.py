"""What the toolkit keeps in its state folder (`$ARI_HOME`), and what can go.

Layout of `$ARI_HOME` (default `~/.cache/ari-bench`):

- `runs/<run_id>/workspace/` and `runs/<run_id>/harness/`: a run's workspace (what the agent
  works in: starter, a copy of the training data, its bundles) and the harness's crash-safety
  notes (`RUNNING` marker, launcher pids). Needed while the run lasts; once its result is
  published (results/<track>/<run_id>.json with the audit log, history and candidates beside
  it) nothing in them is. `toolkit run` removes them when the run ends; a run whose harness died
  keeps them until `toolkit runs recover` has recorded it.
- `prepared-data-*/`: the training text prepared for one `toolkit run` (train.bin, val.bin,
  meta.json), removed when that command ends, whatever happened. An `owner` file names the
  process using it, so that cleaning never takes one from a run in progress.
- `exams/`: public validation set and demo exam, built once from the public banks (caches).
- `default-corpus-v1.txt`: the default training text, extracted once (a cache).

`toolkit runs clean` removes what is left over (finished runs' folders, prepared data whose
command is gone) and, with `--caches`, the caches; never anything of a run in progress.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from toolkit.paths import state_dir
from toolkit.run.recovery import MARKER, PIDS, Marker, is_alive, process_start, runs_root
from toolkit.sandbox import capped

DATA_PREFIX = "prepared-data-"
OWNER_FILE = "owner"
EXAMS_DIR = "exams"
CORPUS_GLOB = "default-corpus-*.txt"
# A prepared-data folder without an owner file younger than this may be one being made now.
_FRESH_S = 300.0
# A run folder with no marker and no process yet, older than this, is a set-up that was killed.
_ABANDONED_S = 3600.0


def new_data_dir() -> Path:
    """A fresh `prepared-data-*` folder, owned by this process (see `OWNER_FILE`)."""
    path = Path(tempfile.mkdtemp(prefix=DATA_PREFIX, dir=state_dir()))
    pid = os.getpid()
    (path / OWNER_FILE).write_text(f"{pid} {process_start(pid)}\n", encoding="utf-8")
    return path


def remove_tree(path: Path) -> None:
    """Remove a folder, also where a sandboxed agent left parts of it read-only: every folder
    is made writable (top-down, before the walk enters it), then the tree is removed."""
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
        return
    if not path.exists():
        return
    capped.release(path)  # a workspace's size cap left mounted by a set-up that was killed
    rwx = stat.S_IRUSR | stat.S_IWUSR | stat.S_IXUSR
    with contextlib.suppress(OSError):
        path.chmod(path.stat().st_mode | rwx)
    for dirpath, dirs, _files in os.walk(path):
        for name in dirs:
            sub = os.path.join(dirpath, name)
            with contextlib.suppress(OSError):
                mode = os.lstat(sub).st_mode
                if stat.S_ISDIR(mode):
                    os.chmod(sub, mode | rwx)
    shutil.rmtree(path, ignore_errors=True)


def discard_run(run_id: str) -> bool:
    """Remove a finished run's workspace and harness folder; False (kept) unless finished."""
    folder = runs_root() / run_id
    if not folder.exists() or _marker_state(folder) is not None:
        return False
    remove_tree(folder)
    return True


def _marker_state(run_folder: Path) -> str | None:
    """What a run folder holds: None for a finished run (its result is published), else
    'running', 'interrupted' (harness dead, not yet recovered), 'starting' or 'abandoned'.

    The harness writes its RUNNING marker only once the workspace is assembled, and records a
    pid as soon as it starts a process; a folder with neither is a run being set up right now,
    or (when old) one whose set-up was killed."""
    harness = run_folder / "harness"
    path = harness / MARKER
    if not path.exists():
        if (harness / PIDS).exists() or (harness / f"{MARKER}.recovered").exists():
            return None
        try:
            age = time.time() - run_folder.stat().st_mtime
        except OSError:
            return None
        return "abandoned" if age > _ABANDONED_S else "starting"
    try:
        marker = Marker.model_validate_json(path.read_bytes())
    except (OSError, ValueError):
        return "running"  # unreadable: being written right now, or damaged; never touch it
    return "running" if is_alive(marker.pid, marker.pid_start) else "interrupted"


def _owner_alive(data_dir: Path) -> bool:
    try:
        pid_text, _, start = (data_dir / OWNER_FILE).read_text(encoding="utf-8").partition(" ")
        return is_alive(int(pid_text), start.strip())
    except FileNotFoundError:
        # No owner file: left by an older toolkit, or one being created this very moment.
        try:
            return time.time() - data_dir.stat().st_mtime < _FRESH_S
        except OSError:
            return False
    except (OSError, ValueError):
        return True  # unreadable owner: keep it


def _size(path: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total


@dataclass(frozen=True)
class Leftover:
    """One thing in the state folder, and whether `runs clean` removes it."""

    path: Path
    what: str  # 'finished run', 'prepared data', 'cache', ...
    removable: bool
    reason: str  # why it stays or goes
    size: int


def leftovers(*, caches: bool = False) -> list[Leftover]:
    """Everything `runs clean` would consider, with its verdict."""
    home = state_dir()
    found: list[Leftover] = []
    running = False
    root = runs_root()
    for folder in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        state = _marker_state(folder)
        running = running or state in ("running", "starting")
        verdict = {
            None: ("finished run", True, "result published"),
            "running": ("run", False, "still running"),
            "starting": ("run", False, "being set up"),
            "interrupted": ("run", False, "its harness died: run `toolkit runs recover` first"),
            "abandoned": ("run", True, "its set-up was stopped before the run started"),
        }[state]
        found.append(Leftover(folder, *verdict, _size(folder)))
    for data in sorted(home.glob(DATA_PREFIX + "*")):
        if not data.is_dir():
            continue
        if _owner_alive(data):
            found.append(Leftover(data, "prepared data", False, "in use", _size(data)))
        else:
            reason = "empty (a start that failed)" if not any(data.iterdir()) else "owner gone"
            found.append(Leftover(data, "prepared data", True, reason, _size(data)))
    if caches:
        for cache in [home / EXAMS_DIR, *sorted(home.glob(CORPUS_GLOB))]:
            if not cache.exists():
                continue
            reason = "a run is in progress" if running else "rebuilt when needed"
            found.append(Leftover(cache, "cache", not running, reason, _size(cache)))
    return found


def clean(*, caches: bool = False, dry_run: bool = False) -> list[Leftover]:
    """Remove every removable leftover (unless `dry_run`); return what was considered."""
    found = leftovers(caches=caches)
    if not dry_run:
        for item in found:
            if item.removable:
                remove_tree(item.path)
    return found
