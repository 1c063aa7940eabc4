"""The submission history: every candidate the agent submitted and every promotion, in order.

It is a chained log (`toolkit.results.chain`), written by the harness only. The graded candidate is
the one promoted last; the public-validation score recorded here is feedback for the agent and
is never used to choose.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from toolkit.results.chain import ChainedLog, ChainError, read_chain
from toolkit.results.model import Candidate, PromotedCandidate, RunResult

HISTORY_FILE = "history.jsonl"


class SubmissionHistory:
    """Candidates and promotions of one run, backed by `history.jsonl`."""

    def __init__(self, path: Path) -> None:
        self.log = ChainedLog(path)
        self._entries = read_chain(path)
        self.closed = False  # set when the run ends: late writers (a slow submit) are dropped

    def close(self) -> None:
        self.closed = True

    def _append(self, entry: dict[str, Any]) -> bool:
        if self.closed:
            return False
        self._entries.append(self.log.append(entry))
        return True

    @property
    def path(self) -> Path:
        return self.log.path

    def next_id(self) -> str:
        return f"c{len(self.candidates()) + 1:03d}"

    def add_candidate(self, candidate: Candidate, source: str) -> bool:
        """Record a submission; False if the run has already ended."""
        entry: dict[str, Any] = {
            "kind": "submit",
            "source": source,
            **candidate.model_dump(mode="json"),
        }
        return self._append(entry)

    def record_public(self, candidate_id: str, score: float | None, error: str | None) -> bool:
        """Record a candidate's public-validation score (feedback only), once it is known."""
        entry = {"kind": "public", "id": candidate_id, "public_score": score, "error": error}
        return self._append(entry)

    def promote(self, candidate_id: str, at: datetime, elapsed_s: float) -> PromotedCandidate:
        """Mark a candidate as the one to grade; `KeyError` if there is no such candidate."""
        match = next((c for c in self.candidates() if c.id == candidate_id), None)
        if match is None:
            raise KeyError(candidate_id)
        entry = {"kind": "promote", "id": candidate_id, "promoted_at": at.isoformat()}
        if not self._append({**entry, "elapsed_s": round(elapsed_s, 3)}):
            raise KeyError(candidate_id)
        return PromotedCandidate(
            id=match.id,
            sha256=match.sha256,
            packed_bytes=match.packed_bytes,
            promoted_at=at,
            elapsed_s=elapsed_s,
        )

    def candidates(self) -> list[Candidate]:
        return candidates_of(self._entries)

    def promoted(self) -> PromotedCandidate | None:
        return promoted_of(self._entries)

    def verify(self) -> None:
        """Check the file against what this harness wrote (raises `ChainError`)."""
        self.log.verify()

    def render(self) -> str:
        """The table `runner history` prints."""
        promoted = self.promoted()
        lines = ["id    elapsed  packed_bytes  public  sha256        source"]
        sources = {e["id"]: e.get("source", "") for e in self._entries if e["kind"] == "submit"}
        for c in self.candidates():
            score = f"{c.public_score:5.1f}%" if c.public_score is not None else "  n/a "
            mark = "  <- promoted" if promoted and promoted.id == c.id else ""
            lines.append(
                f"{c.id}  {c.elapsed_s:7.0f}s {c.packed_bytes:13d}  {score}  {c.sha256[:12]}  "
                f"{sources.get(c.id, '')}{mark}"
            )
        if len(lines) == 1:
            lines.append("(no candidates yet: `runner submit DIR` packs and scores one)")
        return "\n".join(lines)


def candidates_of(entries: list[dict[str, Any]]) -> list[Candidate]:
    """Candidates in submission order, with their public scores once recorded."""
    fields = set(Candidate.model_fields)
    raw = {
        e["id"]: {k: v for k, v in e.items() if k in fields}
        for e in entries
        if e["kind"] == "submit"
    }
    for e in entries:
        if e["kind"] == "public" and e["id"] in raw:
            raw[e["id"]].update(public_score=e["public_score"], error=e["error"])
    return [Candidate.model_validate(c) for c in raw.values()]


def promoted_of(entries: list[dict[str, Any]]) -> PromotedCandidate | None:
    by_id = {c.id: c for c in candidates_of(entries)}
    last = next((e for e in reversed(entries) if e["kind"] == "promote"), None)
    if last is None:
        return None
    c = by_id[last["id"]]
    return PromotedCandidate(
        id=c.id,
        sha256=c.sha256,
        packed_bytes=c.packed_bytes,
        promoted_at=datetime.fromisoformat(last["promoted_at"]),
        elapsed_s=last["elapsed_s"],
    )


def check_against(path: Path, result: RunResult) -> None:
    """Check a published history against its result file (catches lines dropped at the end)."""
    entries = read_chain(path)
    listed = [(c.id, c.sha256) for c in result.candidates]
    recorded = [(c.id, c.sha256) for c in candidates_of(entries)]
    if recorded != listed:
        raise ChainError(
            f"{path}: {len(recorded)} candidates recorded but the result lists {len(listed)} "
            "(or their hashes differ): the history was cut or edited"
        )
    promoted = promoted_of(entries)
    if (promoted.id if promoted else None) != (result.promoted.id if result.promoted else None):
        raise ChainError(f"{path}: the last promotion does not match the result's promoted id")
