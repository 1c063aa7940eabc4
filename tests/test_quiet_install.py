"""`make demo` / `make venv` install quietly (issue 51 item 5): setuptools' boxed
"Editable installation" note is filtered, and nothing else is."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _filter() -> str:
    text = (REPO / "Makefile").read_text()
    match = re.search(r"^QUIET_EDITABLE := (.+)$", text, re.MULTILINE)
    assert match, "the Makefile names its warnings filter"
    assert 'PYTHONWARNINGS="$(QUIET_EDITABLE)" $(BIN)/python -m pip install' in text
    return match.group(1)


def _stderr(message: str) -> str:
    code = f"import warnings; warnings.warn({message!r}, UserWarning)"
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONWARNINGS": _filter(), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.stderr


def test_the_editable_install_note_is_filtered_and_other_warnings_are_not() -> None:
    assert _stderr("Editable installation.\n!!\n  Please be careful ...") == ""
    assert "something else" in _stderr("something else")
