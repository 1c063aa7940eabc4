"""`toolkit learn-exam` stopped by SIGTERM removes its temporary folders (issue 51 item 5)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from exam_builder.build import build_exam

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "exam_builder" / "banks" / "public" / "demo"


def test_sigterm_leaves_no_ari_learn_folder(tmp_path: Path) -> None:
    exam = tmp_path / "exam"
    build_exam(DEMO, exam, english_text=None, allow_in_repo=True)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch), "ARI_HOME": str(tmp_path / "home")}
    code = "from toolkit.cli import main; main()"
    args = ["learn-exam", "--bank", str(DEMO), "--exam", str(exam), "--families", "records"]
    learner = subprocess.Popen(
        [sys.executable, "-c", code, *args, "--seconds", "120"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while not list(scratch.glob("ari-learn-*")):
            assert learner.poll() is None, learner.stderr.read() if learner.stderr else ""
            assert time.monotonic() < deadline, "no ari-learn-* folder in 120 s"
            time.sleep(0.2)
        time.sleep(1.0)  # inside its training
        learner.send_signal(signal.SIGTERM)
        assert learner.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        if learner.poll() is None:
            learner.kill()
            learner.wait()
    assert not list(scratch.glob("ari-learn-*"))
