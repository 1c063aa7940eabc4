"""What a hidden grading may publish: every number coarse, every reason from a fixed list.

A bundle sees the hidden exam while it is graded: its prompts in phase 1, the answer bytes in
phase 2 (each after its own prediction). Whatever the grading publishes afterwards is a channel
from the bundle to the outside, and a bundle that scores 0 on purpose can still spend a run to
send bits of the answer key through it: a bits-per-byte value it steers to chosen decimals
(phase-2 rows that give every printable byte one small probability make each target cost what
the bundle picks), a grading time it stretches by sleeping, a crash with a chosen exit status
or in a chosen batch. So each published field of a hidden grading takes few values, and the
count of values is the bound (`site/docs/security/channels.md` sums them):

- bits per byte (`coarse_bpb`): clipped to [0, `BPB_MAX`] and rounded to `BPB_STEP`: 33
  values, and None when phase 2 gave none. 8 bits per byte is what a uniform guess over the 256
  byte values costs; a model worse than that is published as no better than a guess;
- the grading's duration (`coarse_seconds`): the lower edge of its bucket in `TIME_EDGES_S`
  (under a minute, under ten, longer): 3 values;
- the weights-ablation score (`coarse_ablation`): its pass count rounded down to a tenth of
  the exam: at most 11 values (the model-free flag is computed from the coarse value, so it
  adds nothing);
- a failure's reason (`hidden_reason`): one of `HIDDEN_REASONS`, with no exit status, signal,
  batch number or size in it.

The exact values are the operator's: `grade.py` writes them to the operator log, which is no
part of a results folder. Public scoring (feedback to the agent on the public set) is not a
hidden grading and publishes exact numbers and the bundle's own words.
"""

from __future__ import annotations

import math

from toolkit.grading.session import Category, Kind, Where
from toolkit.results.model import Score

BPB_MAX = 8.0
"""Bits per byte of a uniform guess over 256 byte values: the top of the published range."""
BPB_STEP = 0.25
"""Published bits per byte are multiples of this (33 values from 0 to `BPB_MAX`)."""
TIME_EDGES_S = (0.0, 60.0, 600.0)
"""A hidden grading's duration is published as the largest of these it reached."""
ABLATION_PARTS = 10
"""The ablated pass count is published rounded down to 1/ABLATION_PARTS of the exam."""

# The words every page and help text uses for these bounds (a test holds them to the numbers
# above: `tests/grading/test_published_words.py`).
BPB_WORDS = f"0 to {BPB_MAX:g} in steps of {BPB_STEP:g}"
"""How a hidden grading publishes bits per byte: "0 to 8 in steps of 0.25"."""
TIME_WORDS = "under a minute, one to ten minutes, or longer"
"""The buckets of `TIME_EDGES_S`, in words."""
ABLATION_WORDS = f"rounded down to 1/{ABLATION_PARTS} of the exam"
"""How a hidden grading publishes the ablated pass count."""


def coarse_bpb(bpb: float | None) -> float | None:
    """Bits per byte as a hidden grading publishes it: clipped to [0, BPB_MAX], then rounded
    to the nearest multiple of BPB_STEP (NaN or infinity: BPB_MAX). None stays None."""
    if bpb is None:
        return None
    if not math.isfinite(bpb):
        return BPB_MAX
    clipped = min(max(bpb, 0.0), BPB_MAX)
    return round(clipped / BPB_STEP) * BPB_STEP


def bpb_values() -> list[float]:
    """Every value `coarse_bpb` can return, None aside."""
    return [i * BPB_STEP for i in range(int(BPB_MAX / BPB_STEP) + 1)]


def coarse_seconds(seconds: float) -> float:
    """A hidden grading's duration as published: the largest edge of `TIME_EDGES_S` it
    reached (0: under a minute, 60: one to ten minutes, 600: ten minutes or more)."""
    return max(edge for edge in TIME_EDGES_S if seconds >= edge or edge == 0.0)


def bucket_end(seconds: float, ceiling_s: float) -> float:
    """Where the published bucket of a grading that took `seconds` ends: the next edge of
    `TIME_EDGES_S` above it, or for the last bucket `ceiling_s` (the longest a grading can
    take). Nothing of the grading may be written before then: a file's ctime cannot be set
    back, so a write at the grading's end would publish its exact length (`final_grading`)."""
    bucket = coarse_seconds(seconds)
    later = [edge for edge in TIME_EDGES_S if edge > bucket]
    return min(later) if later else max(ceiling_s, seconds)


def ablation_step(total: int) -> int:
    """Questions per published step of the ablated pass count: a tenth of the exam, rounded
    up (1 for an exam of 10 questions or fewer)."""
    return max(1, -(-total // ABLATION_PARTS))


def coarse_ablation(score: Score) -> Score:
    """The ablated score as published: its pass count rounded down to `ablation_step`."""
    step = ablation_step(score.total)
    passed = score.passed // step * step
    return Score(percent=100.0 * passed / score.total, passed=passed, total=score.total)


# -- failure reasons -------------------------------------------------------------------------

_WHERE = {
    Where.GRADING: "",
    Where.LOAD: "load()",
    Where.GENERATE: "generate()",
    Where.LOGPROBS: "next_byte_logprobs()",
}
"""Where a failure happened, without its batch number (the bundle picks where it fails)."""

TIME_LIMIT = "ran past its time limit"
RAISED = "the bundle raised an error"
PROTOCOL = "the worker broke the grading protocol"
CRASHED = "crashed: the worker died"
LIMIT_KILLED = "crashed: the worker was killed at a memory or process limit"
WRONG_OUTPUTS = "some outputs were of the wrong length or type (the operator log lists them)"
"""The reason of a grading that completed with outputs it could not compare (not a failure)."""

_KIND: dict[Kind, str] = {
    Kind.CANCELLED: "grading cancelled: the call's time or the run is over",
    Kind.TOO_LARGE: "the packed bundle is over the size limit",
    Kind.REJECTED: "the bundle could not be packed or unpacked",
    Kind.LOAD_TIME: TIME_LIMIT,
    Kind.BATCH_TIME: TIME_LIMIT,
    Kind.PHASE_TIME: TIME_LIMIT,
    Kind.RAISED: RAISED,
    Kind.MALFORMED: PROTOCOL,
    Kind.NOT_JSON: PROTOCOL,
    Kind.NOT_FRAME: PROTOCOL,
    Kind.OVERSIZED: PROTOCOL,
    Kind.STOPPED_READING: PROTOCOL,
    Kind.WRONG_COUNT: PROTOCOL,
    Kind.NOT_LOGPROBS: PROTOCOL,
    Kind.EXITED: CRASHED,
    Kind.SIGNALLED: CRASHED,
    Kind.KILLED: CRASHED,
    Kind.LIMIT_KILLED: LIMIT_KILLED,
}
"""Each failure kind's published words: no number in any of them. Exit statuses and signals
(a bundle chooses them) fold into one crash; only a kill at the sandbox's limits stays apart,
since it tells a reader that the bundle was too big for the box."""

_BUNDLE_KINDS = frozenset(_KIND) - {Kind.CANCELLED, Kind.TOO_LARGE, Kind.REJECTED}
"""The kinds that happen where the bundle's code runs (they are placed in a part)."""


def hidden_reason(category: Category) -> str:
    """A failure category as a hidden grading publishes it: one of `HIDDEN_REASONS`."""
    what = _KIND[category.kind]
    where = _WHERE[category.where] if category.kind in _BUNDLE_KINDS else ""
    return f"{where}: {what}" if where else what


def _all_reasons() -> frozenset[str]:
    reasons = {_KIND[k] for k in _KIND if k not in _BUNDLE_KINDS}
    for where in (Where.GRADING, Where.LOAD, Where.GENERATE, Where.LOGPROBS):
        for kind in _BUNDLE_KINDS:
            prefix = _WHERE[where]
            reasons.add(f"{prefix}: {_KIND[kind]}" if prefix else _KIND[kind])
    return frozenset(reasons)


HIDDEN_REASONS = _all_reasons()
"""Every reason `hidden_reason` can return (the bound on a failed grading's reason)."""

PHASE1_REASONS = frozenset(
    r for r in HIDDEN_REASONS if not r.startswith(_WHERE[Where.LOGPROBS] + ":")
)
"""The reasons a grading that *fails* can publish: phase 2 failing loses only bits per byte
(it never fails the run), so `next_byte_logprobs()` reasons are never published in a result."""


def bits(values: int) -> float:
    """The most a field that takes `values` distinct values can carry, in bits."""
    return math.log2(values) if values > 1 else 0.0
