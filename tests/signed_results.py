"""Test data signed the way the harness signs it: this test session's key, listed in the folder.

Result files written by hand (not through `toolkit.results.model.save_run`) are unsigned, and every
reader treats an unsigned file as unverified; tests that need a good file sign it here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from toolkit.results import signing
from toolkit.results.model import RunResult


def sign_run(results: Path, run: dict[str, Any]) -> dict[str, Any]:
    """`run` signed with this session's key, which `results/signing_keys.json` then lists; a
    run the model refuses is returned as it is (its own error comes first)."""
    try:
        RunResult.model_validate(run)
    except ValidationError:
        return run
    signing.trust(results, signing.local_public())
    return {**run, "signature": signing.sign(run).model_dump()}
