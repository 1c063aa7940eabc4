"""Red-team: `runner submit` with a path the host cannot even stat must be refused, not crash.

`Submissions.submit` resolves the agent's argument and asks `is_dir()`; a name over the
host's limits (one component over 255 bytes, or a path over 4096) makes `stat` raise
ENAMETOOLONG, which `is_dir()` does not swallow. The service then records a harness failure and
the run ends `invalid`: a free rerun for one shell command.
"""

from __future__ import annotations

import pytest

from tests.run.conftest import MAKE_BUNDLE, ShellAgent, SpecFactory
from toolkit.run.orchestrate import execute_run

LONG = {
    "component": "runner submit \"$(printf 'a%.0s' $(seq 300))\"; echo rc=$?\n",
    "path": "runner submit \"$(printf 'a/%.0s' $(seq 2100))\"; echo rc=$?\n",
}


@pytest.mark.parametrize("kind", sorted(LONG))
def test_submit_of_an_overlong_path_is_refused(kind: str, make_spec: SpecFactory) -> None:
    script = f"{MAKE_BUNDLE}\nrunner submit bundles/triv && runner promote c001\n{LONG[kind]}"
    spec = make_spec(ShellAgent(script), budget=40, per_call=15, reserved=3)
    result = execute_run(spec)
    assert result.status == "valid", (result.status_reason or "")[:300]
    transcript = (spec.results_dir / spec.track.id / result.run_id / "transcript.txt").read_text()
    assert "rc=1" in transcript, transcript[-500:]
