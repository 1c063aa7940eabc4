"""`scripts/cpu-by-process.py`: a command's CPU charged to the kinds of process that used it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "cpu-by-process.py"

# Two children of known kinds, each busy about a second, under a shell.
BUSY = "import time\nend = time.process_time() + 1.0\nwhile time.process_time() < end:\n    pass\n"


def test_busy_children_are_charged_to_their_kinds(tmp_path: Path) -> None:
    train = tmp_path / "train.py"
    train.write_text(BUSY)
    other = tmp_path / "busy.py"
    other.write_text(BUSY)
    out = tmp_path / "cpu.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(out), "--interval", "0.1",
         "--window", "0.5", "--",
         "sh", "-c", f"{sys.executable} {train} && {sys.executable} {other}; exit 3"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr  # the command's own exit status
    result = json.loads(out.read_text())
    kinds = result["kinds"]
    assert kinds["starter training (train.py)"] >= 0.7, kinds
    assert kinds["python, other"] >= 0.7, kinds
    assert result["busy_s"] >= 1.8
    # The timeline: the box's busy cores, window by window; a busy child fills about one.
    assert result["window_s"] == 0.5 and len(result["timeline"]) >= 3, result
    assert max(result["timeline"]) >= 0.7, result["timeline"]
    assert "| starter training (train.py) |" in done.stderr
    again = subprocess.run(
        [sys.executable, str(SCRIPT), "--report", str(out)], capture_output=True, text=True
    )
    assert again.returncode == 0 and "| kind of process | CPU s | share |" in again.stdout
    assert "busy cores in each 0.5 s" in again.stdout
