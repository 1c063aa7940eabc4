"""Was a run under its track's rules? What differed, in words, when it was not.

A track freezes the exam, the budget, the per-call limit, the reserved window, the size limit
and the grading parameters (and may pin the training data). A run records what it really ran
under in its effective config. A run whose recorded values differ from the track's is not part
of any row's statistics: the row lists it apart with the labels returned here (DESIGN §7).

Only what a run records is compared: a run file without a grading block (hand-made, or from an
older toolkit) is compared on its budget and exam alone. The training data are the exception:
on a track that pins them, a run that did not record its data cannot show it had the right ones.
"""

from __future__ import annotations

from toolkit.results.model import RunResult
from toolkit.tracks.model import Track

# Relative tolerance for comparing recorded numbers (JSON may write 300 as 300.0).
_REL = 1e-9


def _differs(recorded: object, frozen: float) -> bool:
    if isinstance(recorded, bool) or not isinstance(recorded, int | float):
        return recorded is not None  # a recorded non-number is a difference; absent is not
    return abs(float(recorded) - frozen) > _REL * max(1.0, abs(frozen))


def _num(value: object) -> str:
    return f"{value:g}" if isinstance(value, int | float) else str(value)


class TrackRules:
    """A track's frozen values, prepared once to check many runs against them."""

    def __init__(self, track: Track) -> None:
        self.track = track
        self.grading: dict[str, float] = {
            **track.grading.model_dump(),
            "size_limit_bytes": track.size_limit_bytes,
        }
        self.budget = {
            "budget_s": track.budget_s,
            "per_call_limit_s": track.per_call_limit_s,
            "reserved_s": track.reserved_s,
        }

    def plainly_under(self, run: RunResult) -> bool:
        """A quick check that settles the common case: every value recorded as frozen."""
        track, config = self.track, run.config
        return (
            run.timings.budget_s == track.budget_s
            and all(config.budget.get(k, v) == v for k, v in self.budget.items())
            and all(config.grading.get(k, v) == v for k, v in self.grading.items())
            and track.matches_exam(config.exam_sha256)
            and config.public_set_sha256.startswith(track.public_set_sha256 or "")
            and not (track.train_data_sha256 or track.val_data_sha256)
            and not run.usage.budget_spent
        )

    def differences(self, run: RunResult) -> list[str]:
        """What of the run's effective configuration differs from the track's rules."""
        if self.plainly_under(run):
            return []
        return _differences(run, self.track, self.grading)


def rule_differences(run: RunResult, track: Track) -> list[str]:
    """What of the run's effective configuration differs from its track's rules ([] if none)."""
    return TrackRules(track).differences(run)


def _differences(run: RunResult, track: Track, frozen_grading: dict[str, float]) -> list[str]:
    config = run.config
    found: list[str] = []
    if not track.matches_exam(config.exam_sha256):
        found.append(f"exam {config.exam_sha256[:8]} (track: {track.exam_sha256[:8]})")
    if track.public_set_sha256 and not config.public_set_sha256.startswith(track.public_set_sha256):
        found.append(
            f"public set {config.public_set_sha256[:8]} (track: {track.public_set_sha256[:8]})"
        )
    budget = config.budget.get("budget_s", run.timings.budget_s)
    if _differs(budget, track.budget_s) or _differs(run.timings.budget_s, track.budget_s):
        shown = budget if _differs(budget, track.budget_s) else run.timings.budget_s
        found.append(f"budget {_num(shown)} s (track: {_num(track.budget_s)} s)")
    for key, frozen, what in (
        ("per_call_limit_s", track.per_call_limit_s, "per-call limit"),
        ("reserved_s", track.reserved_s, "reserved window"),
    ):
        if _differs(config.budget.get(key), frozen):
            found.append(f"{what} {_num(config.budget[key])} s (track: {_num(frozen)} s)")
    for key, frozen_value in frozen_grading.items():
        if _differs(config.grading.get(key), frozen_value):
            found.append(f"grading {key} {_num(config.grading[key])} (track: {_num(frozen_value)})")
    if track.train_data_sha256 or track.val_data_sha256:
        data = config.train_data
        problem = track.train_data_mismatch(
            data.train_sha256 if data else None, data.val_sha256 if data else None
        )
        if problem:
            found.append(f"training data: {problem}")
    capped = _lowered_cap(run, track)
    if capped:
        found.append(capped)
    return found


def _lowered_cap(run: RunResult, track: Track) -> str | None:
    """A spend cap below the track's that the run ran into: the operator's cap, not the
    track's, decided how the run ended (`--max-tokens-total 3000` stopping it at one call
    over), so it is not a run under the track's rules. A lowered cap never reached is not."""
    usage = run.usage
    if not usage.budget_spent:
        return None
    for recorded, frozen, what in (
        (usage.max_tokens_total, track.max_tokens_total, "token budget"),
        (usage.max_cost_usd, track.max_cost_usd, "cost budget (USD)"),
    ):
        if recorded is not None and (frozen is None or recorded < frozen):
            shown = "none" if frozen is None else _num(frozen)
            return f"{what} lowered to {_num(recorded)} and spent (track: {shown})"
    return None
