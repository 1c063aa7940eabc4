"""Attacks on the results volume (issue 27, item 2): a run cannot turn what it stores against
the harness.

- An agent submits incompressible bundles until the results volume (a small tmpfs) is full: the
  harness's reserve keeps room for its logs and the result; the run ends `failed` with the
  reason (its own files filled the volume), never `invalid`; its logs are whole and the result
  validates.
- An agent floods the requests FIFO with thousands of made-up call names: the audit log lists
  the first ones, counts the rest in a few summary entries, and stays small.
- The track's candidate caps refuse submissions past them, told to the agent and audited.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.run.conftest import MAKE_BUNDLE, ShellAgent, SpecFactory
from tests.run.small_fs import small_fs
from toolkit.cli import cli
from toolkit.results.chain import read_chain
from toolkit.run.orchestrate import execute_run
from toolkit.run.storage import RESERVE_BYTES, StorageError
from toolkit.runner.audit_gate import MALFORMED_LOGGED

# Submit 3 MB of random bytes (incompressible: the archive is as big) again and again; the
# first candidate is promoted. The loop ends when a submission says the volume is full.
FILL = """mkdir -p bundles/big
cp bundles/triv/inference.py bundles/big/
runner submit bundles/triv && runner promote c001
i=0
while [ $i -lt 60 ]; do
  head -c 3000000 /dev/urandom > bundles/big/w.bin
  runner submit bundles/big > out.txt 2>&1; tail -n 2 out.txt
  if grep -q 'results volume is full' out.txt; then echo FULL; break; fi
  i=$((i+1))
done
"""


def _audit(results: Path, track: str, run_id: str) -> list[dict[str, object]]:
    return read_chain(results / track / run_id / "audit.jsonl")


def test_an_agent_that_fills_the_results_volume_fails_its_run(
    make_spec: SpecFactory, tmp_path: Path
) -> None:
    with small_fs(tmp_path / "results", RESERVE_BYTES + 32 * 2**20) as results:
        spec = make_spec(
            ShellAgent(MAKE_BUNDLE + FILL), budget=120, per_call=60, reserved=5, results_dir=results
        )
        result = execute_run(spec)
        assert result.status == "failed", result.status_reason
        assert result.status_reason and "the run filled it" in result.status_reason
        assert result.evidence is None and result.score.passed == 0
        assert len(result.candidates) >= 5  # it did store a lot
        entries = _audit(results, spec.track.id, result.run_id)  # whole: no cut line
        notes = [str(e.get("note") or "") for e in entries]
        assert any("results volume is full" in n for n in notes), notes
        file = results / spec.track.id / f"{result.run_id}.json"
        done = CliRunner().invoke(cli, ["runs", "validate", str(file)])
        assert done.exit_code == 0, done.output
        assert not list((results / spec.track.id).glob(".*.reserve"))  # released


def test_a_flood_of_made_up_requests_is_counted_not_listed(make_spec: SpecFactory) -> None:
    flood = 5000
    script = (
        f"{MAKE_BUNDLE}runner submit bundles/triv && runner promote c001\n"
        f"seq 10000001 {10000000 + flood} > .runner/requests\n"
        "sleep 2\nrunner time_left\n"
    )
    spec = make_spec(ShellAgent(script), budget=60, per_call=30, reserved=5)
    result = execute_run(spec)
    assert result.status == "valid", result.status_reason
    entries = _audit(spec.results_dir, spec.track.id, result.run_id)
    calls = [e for e in entries if "summary" not in e]
    summaries = [e for e in entries if "summary" in e]
    malformed = [e for e in calls if e.get("exit_code") == 64]
    assert len(malformed) == MALFORMED_LOGGED, len(malformed)
    counted = sum(
        int(str(e["count"])) for e in summaries if e["summary"] in ("malformed", "unread")
    )
    unread = [e for e in calls if "before this call was read" in str(e.get("note"))]
    assert len(malformed) + len(unread) + counted == flood, (len(unread), counted)
    assert len(summaries) <= flood // 1000 + 2
    size = (spec.results_dir / spec.track.id / result.run_id / "audit.jsonl").stat().st_size
    assert size < 200_000, size  # 5,000 entries would be about 2 MB


def test_the_tracks_candidate_caps_refuse_and_say_so(make_spec: SpecFactory) -> None:
    script = (
        f"{MAKE_BUNDLE}for i in 1 2 3 4; do runner submit bundles/triv; done\nrunner promote c001\n"
    )
    spec = make_spec(ShellAgent(script), budget=60, per_call=30, reserved=5)
    spec.track = spec.track.model_copy(update={"max_candidates": 2})
    result = execute_run(spec)
    assert result.status == "valid", result.status_reason
    assert [c.id for c in result.candidates] == ["c001", "c002"]
    entries = _audit(spec.results_dir, spec.track.id, result.run_id)
    refused = [e for e in entries if "max_candidates 2" in str(e.get("note"))]
    assert len(refused) == 2 and all(e["exit_code"] == 1 for e in refused), refused
    transcript = (spec.results_dir / spec.track.id / result.run_id / "transcript.txt").read_text()
    assert transcript.count("the most the track allows (max_candidates 2)") == 2

    # The byte cap: one archive fits, the next would pass it.
    size = result.candidates[0].packed_bytes
    spec2 = make_spec(ShellAgent(script), budget=60, per_call=30, reserved=5)
    spec2.results_dir = spec.results_dir.parent / "results2"
    spec2.track = spec2.track.model_copy(update={"max_candidate_bytes": size + size // 2})
    result2 = execute_run(spec2)
    assert [c.id for c in result2.candidates] == ["c001"]
    entries = _audit(spec2.results_dir, spec2.track.id, result2.run_id)
    assert sum("max_candidate_bytes" in str(e.get("note")) for e in entries) == 3
    assert json.dumps(entries)  # whole and readable


def test_a_volume_without_room_for_the_reserve_refuses_the_run(
    make_spec: SpecFactory, tmp_path: Path
) -> None:
    """Checked before the clock starts: the run does not start, and leaves nothing behind."""
    with small_fs(tmp_path / "results") as results:  # 8 MiB: less than the reserve
        spec = make_spec(ShellAgent(MAKE_BUNDLE), budget=30, per_call=10, reserved=2)
        spec.results_dir = results
        with pytest.raises(StorageError, match=r"less than the .* the harness keeps"):
            execute_run(spec)
        assert not any((results / spec.track.id).iterdir())
