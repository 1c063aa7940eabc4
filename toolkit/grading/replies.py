"""The worker's replies, as typed models checked before the host uses a single field.

The worker runs in the same process as the bundle, so a bundle can replace any reply (patch
`Channel.send`, write its own frames): every reply is untrusted input. Each one is parsed into
the model of what was asked (strict types: no int where a string is expected, no missing or
extra key), and everything a reply carries is checked against the request (as many outputs as
prompts, valid base64, as many log-probability rows as contexts). A reply that does not fit
raises `WorkerFailure` (category "malformed reply", the caller says where; the detail says what
was wrong); one bad output in an otherwise good
reply is a problem on that question only (`GenerateReply.decoded`).

Log-probabilities are checked to be log-probabilities (`logprob_problem`): all finite, none
above 0, and each row's probabilities summing to 1, so that bits per byte cannot be faked with
zeros, infinities or unnormalised scores.
"""

from __future__ import annotations

import base64
import binascii
import math
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolkit.grading.session import Category, Kind, WorkerFailure

MALFORMED = Category(Kind.MALFORMED)

LOGPROB_TOLERANCE = 1e-3
"""How far a row's logsumexp may be from 0, and a log-probability above 0 (float32 rounding)."""
ERROR_CHARS = 300
"""The most of a bundle's error text that goes into a report."""


class _Reply(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class ErrorReply(_Reply):
    """The bundle raised (or the worker refused its result): the reason, as the worker saw it."""

    ok: Literal[False]
    error: str = Field(description="Exception type and message, as the worker formatted them.")
    traceback: str | None = Field(default=None, description="Last lines of the traceback.")
    stage: Literal["load"] | None = Field(default=None, description="'load' when load() failed.")

    def text(self) -> str:
        """The error as one printable line, cut to `ERROR_CHARS`."""
        return " ".join(self.error.split())[:ERROR_CHARS] or "no reason given"

    def log_text(self) -> str:
        """The error and its traceback's last lines, for the operator log."""
        return f"{self.text()}\n{self.traceback}" if self.traceback else self.text()


class LoadReply(_Reply):
    """load() returned."""

    ok: Literal[True]
    stage: Literal["load"]
    load_s: float = Field(ge=0, allow_inf_nan=False, description="Seconds of import + load().")


class GenerateReply(_Reply):
    """generate() returned: each output as base64 (or null and its type when not bytes)."""

    ok: Literal[True]
    outputs: list[str | None] = Field(description="base64 of each output (cut to length + 1).")
    sizes: list[int] = Field(description="Length in bytes of each output as generate() gave it.")
    types: list[str] = Field(description="Type name of each output.")

    def decoded(self, index: int) -> tuple[bytes | None, str, str]:
        """Output `index` as bytes, or None, the problem's category and its detail."""
        output, kind = self.outputs[index], self.types[index][:40]
        if output is None:
            return None, NOT_BYTES, f"generate() returned {kind}, not bytes"
        try:
            return base64.b64decode(output, validate=True), "", ""
        except (binascii.Error, ValueError):
            return None, BAD_BASE64, "the worker's reply carried an output that is not base64"


NOT_BYTES = "not bytes"
"""Problem category of an output of another type (its type name is the bundle's: detail)."""
BAD_BASE64 = "not valid base64"
"""Problem category of an output the worker's reply did not encode."""


class LogprobsReply(_Reply):
    """next_byte_logprobs() returned: float32 little-endian rows, base64."""

    ok: Literal[True]
    logprobs: str = Field(description="base64 of a (contexts, 256) float32 array, row-major.")


_SUCCESS: dict[str, type[_Reply]] = {
    "load": LoadReply,
    "generate": GenerateReply,
    "logprobs": LogprobsReply,
}


def parse(raw: dict[str, Any], op: str) -> _Reply:
    """The reply `raw` to request `op` as its model (an `ErrorReply` when ok is false).

    Raises `WorkerFailure` (malformed, not yet placed: the caller adds where) when it fits
    neither.
    """
    ok = raw.get("ok")
    model = ErrorReply if ok is False else _SUCCESS[op]
    if not isinstance(ok, bool):
        raise WorkerFailure(MALFORMED, "'ok' is not true or false")
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "(top level)"
        raise WorkerFailure(MALFORMED, f"{field}: {err['msg']}") from None


def check_generate(reply: GenerateReply, count: int) -> None:
    """As many outputs, sizes and types as there were prompts; sizes not negative."""
    lengths = {len(reply.outputs), len(reply.sizes), len(reply.types)}
    if lengths != {count}:
        raise WorkerFailure(
            Category(Kind.WRONG_COUNT, (count,)),
            f"{len(reply.outputs)} outputs, {len(reply.sizes)} sizes and {len(reply.types)} "
            f"types for {count} prompts",
        )
    if any(size < 0 for size in reply.sizes):
        raise WorkerFailure(MALFORMED, "a negative size")


def logprob_rows(reply: LogprobsReply, count: int) -> npt.NDArray[np.float32]:
    """The reply's rows as a (count, 256) float32 array; WorkerFailure if they are not that."""
    try:
        data = base64.b64decode(reply.logprobs, validate=True)
    except (binascii.Error, ValueError):
        raise WorkerFailure(MALFORMED, "the log-probabilities are not valid base64") from None
    if len(data) != count * 256 * 4:
        raise WorkerFailure(
            MALFORMED,
            f"{len(data):,} bytes of log-probabilities, want {count} rows of 256 "
            f"float32 ({count * 1024:,} bytes)",
        )
    return np.frombuffer(data, dtype="<f4").reshape(count, 256)


def logprob_problem(rows: npt.NDArray[np.float32]) -> str | None:
    """Why `rows` are not log-probability vectors over 256 bytes (None when they are)."""
    finite = np.isfinite(rows).all(axis=1)
    if not finite.all():
        row = int(np.argmin(finite))
        return f"row {row} holds a value that is not finite (inf or NaN)"
    wide = rows.astype(np.float64)
    above = wide.max(axis=1) > LOGPROB_TOLERANCE
    if above.any():
        row = int(np.argmax(above))
        return f"row {row} holds {float(wide[row].max()):.4g}: a log-probability is at most 0"
    top = wide.max(axis=1, keepdims=True)
    lse = (top + np.log(np.exp(wide - top).sum(axis=1, keepdims=True)))[:, 0]
    off = np.abs(lse) > LOGPROB_TOLERANCE
    if off.any():
        row = int(np.argmax(off))
        return (
            f"row {row}'s probabilities sum to {math.exp(float(lse[row])):.4g}, not 1 "
            f"(logsumexp {float(lse[row]):.4g}, tolerance {LOGPROB_TOLERANCE:g})"
        )
    return None
