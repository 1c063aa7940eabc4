"""The audit log's entries: one per `runner` call, whatever became of the call.

The log is a chained JSON-lines file (`toolkit.results.chain`): each line also carries `seq`
and `prev`.
An entry holds:

    call            the call folder's name (8 characters), as the client sent it
    argv            the arguments, each one as text when it is valid UTF-8 and otherwise as
                    {"b64": "<base64 of its exact bytes>"}; null when no argument list could be
                    read (the call was refused: `note` says why)
    request_bytes   (refused calls only) the size of the argument file as the harness found it
    request_b64     (refused calls only) its bytes, base64, when at most 1 MiB (e.g. an argument
                    list without its final NUL); request_head_b64: the first 4 KiB otherwise
    start, end      wall-clock times (UTC, ISO 8601); start_s, end_s: seconds into the run
    exit_code       what the client exited with (the command's own code, or the runner's:
                    64 refused as malformed, 70 harness error, 75 refused, 124 killed)
    stdout_bytes, stdout_sha256, stderr_bytes, stderr_sha256, output_bytes: what was sent back
    note            why the harness refused, killed or closed the call (null for a plain call)

Arguments are recorded exactly: `decode_arg` gives back the bytes the agent passed. Nothing in
an entry can fail to serialise: every text field is cleaned of lone surrogates here.

What the log keeps of the agent's arguments is bounded per run (`ArgsBudget`): every call's
arguments, as stored (JSON text or base64), count against `ARGS_BUDGET_BYTES`. A call whose
arguments no longer fit is refused (64, with a reply that says why) and its entry keeps only
the first `BUDGET_HEAD_BYTES` of its argument file (`request_head_b64`) and its size
(`request_bytes`): on record, never silently dropped, and never unaudited. Calls of at most
`BUDGET_HEAD_BYTES` (`runner submit DIR`, `runner promote ID`) are never refused for it: their
refusal would keep as much as the call itself.
"""

from __future__ import annotations

import base64
import json
import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any

REQUEST_HEAD_BYTES = 4096
INLINE_REQUEST_BYTES = 1 << 20

# Audited argument bytes a run may store: generous for any real use (a 10 KB script passed to
# `runner sh -c` 25,000 times fits), small next to the results disk, and the audit log stays
# readable whole (`toolkit runs verify`).
ARGS_BUDGET_BYTES = 256 * 1024 * 1024
BUDGET_HEAD_BYTES = 256  # past the budget, what an entry keeps of a call's argument file

AuditArg = str | dict[str, str]


class ArgsBudget:
    """The run's budget of argument bytes stored in the audit log (shared by all its calls)."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = ARGS_BUDGET_BYTES if limit is None else limit
        self.used = 0
        self._lock = threading.Lock()

    def take(self, raw_bytes: int, stored_bytes: int) -> bool:
        """Charge a call whose argument file is `raw_bytes` long and takes `stored_bytes` in the
        log; False (nothing charged) if it does not fit. A call no longer than what a refusal
        keeps anyway always fits."""
        with self._lock:
            if raw_bytes > BUDGET_HEAD_BYTES and self.used + stored_bytes > self.limit:
                return False
            self.used += stored_bytes
            return True

    def refusal(self, raw_bytes: int) -> str:
        return (
            f"the run's audit log has stored {self.used:,} bytes of arguments, and this call's "
            f"{raw_bytes:,} more would pass its budget of {self.limit:,}; pass long input in a "
            "file (short calls such as submit and promote still work)"
        )


def stored_size(argv: list[bytes]) -> int:
    """How many bytes `argv` takes in an audit entry (as `ChainedLog` writes it)."""
    return len(json.dumps([encode_arg(a) for a in argv], ensure_ascii=False).encode())


def b64_size(raw_bytes: int) -> int:
    """How many bytes `raw_bytes` bytes take in an entry as base64."""
    return 4 * ((raw_bytes + 2) // 3)


def encode_arg(arg: bytes) -> AuditArg:
    """One argument for the log: its text if valid UTF-8, else its bytes in base64."""
    try:
        return arg.decode("utf-8")
    except UnicodeDecodeError:
        return {"b64": base64.b64encode(arg).decode("ascii")}


def decode_arg(item: AuditArg) -> bytes:
    """The exact bytes of an argument as `encode_arg` recorded it."""
    if isinstance(item, str):
        return item.encode("utf-8")
    return base64.b64decode(item["b64"], validate=True)


def clean_text(text: str) -> str:
    """`text` with any lone surrogate (bytes that were not UTF-8) escaped, so it serialises."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def to_bytes(text: str) -> bytes:
    """Bytes for the agent: surrogate-escaped bytes go back exactly as they came."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace")


@dataclass
class Outcome:
    """Everything the log says about one call; `entry()` builds the JSON object."""

    call: str
    started_at: datetime
    ended_at: datetime
    start_s: float
    end_s: float
    exit_code: int
    argv: list[bytes] | None = None
    request: bytes | None = None  # the raw argument file of a refused call (or its head)
    request_bytes: int | None = None
    stdout_bytes: int = 0
    stdout_sha256: str = ""
    stderr_bytes: int = 0
    stderr_sha256: str = ""
    note: str | None = None

    def entry(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "call": clean_text(self.call),
            "argv": None if self.argv is None else [encode_arg(a) for a in self.argv],
            "start": self.started_at.isoformat(),
            "end": self.ended_at.isoformat(),
            "start_s": round(self.start_s, 3),
            "end_s": round(self.end_s, 3),
            "exit_code": self.exit_code,
            "stdout_bytes": self.stdout_bytes,
            "stdout_sha256": self.stdout_sha256,
            "stderr_bytes": self.stderr_bytes,
            "stderr_sha256": self.stderr_sha256,
            "output_bytes": self.stdout_bytes + self.stderr_bytes,
            "note": None if self.note is None else clean_text(self.note),
        }
        if self.request_bytes is not None:
            out["request_bytes"] = self.request_bytes
        if self.request is not None:
            key = "request_b64" if len(self.request) == self.request_bytes else "request_head_b64"
            out[key] = base64.b64encode(self.request).decode("ascii")
        return out
