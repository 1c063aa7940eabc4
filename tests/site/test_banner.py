"""A bare `mkdocs build` of this project prints no theme end-of-life banner: the setting is in
the project (mkdocs.yml), not only in the Makefile."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_a_bare_mkdocs_build_prints_no_banner(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "NO_MKDOCS_2_WARNING"}
    env["ARI_RESULTS_DIR"] = str(REPO / "results")
    mkdocs = Path(sys.executable).parent / "mkdocs"  # as a person types it: the console script
    done = subprocess.run(
        [str(mkdocs), "build", "-f", str(REPO / "mkdocs.yml"), "-d", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "end of life" not in done.stderr + done.stdout, done.stderr
