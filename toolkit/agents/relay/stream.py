"""Passing the provider's answer back to the controller (`StreamRelay`): an error answer read
whole (the key blanked), a good one passed on chunk by chunk as it comes (SSE, never buffered)
while its usage is read on the way; then the call, as it ended (`Ended`), goes to whoever
settles it (the front: counted, logged, heard by the verdict, charged to the budget), before
the controller can have the whole answer.

It sends through a `Sender` (the forwarder) and tells `settle` and `answered` what happened:
each can be a fake in a test.
"""

from __future__ import annotations

import http.client
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Protocol

from toolkit.agents.provider_api import Tokens, UsageReader, is_failure
from toolkit.agents.relay.accounting import short
from toolkit.agents.relay.budget import Reservation
from toolkit.agents.relay.forward import MAX_ERROR_BODY, Sent
from toolkit.agents.relay.policy import error_body

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "accept-encoding",
    }
)

DROPPED_BACK = frozenset({"set-cookie", "date", "server"}) | HOP_BY_HOP


class Sender(Protocol):
    """How the stream relay reaches the provider (`forward.Forwarder`)."""

    def send_with_retries(
        self, path: str, query: str, body: bytes, headers: dict[str, str], started: float
    ) -> Sent: ...

    def release(self, conn: http.client.HTTPConnection, reusable: bool) -> None: ...

    def redact(self, data: bytes) -> bytes: ...


@dataclass(frozen=True)
class Outgoing:
    """A call ready for the provider, as the front made it."""

    path: str
    query: str
    body: bytes
    headers: dict[str, str]
    notes: dict[str, list[str]]
    """What the policy changed in it, for its log line."""
    arrived: float
    """When the controller's request came in (monotonic)."""
    held: Reservation
    """What the budget holds for it until it is settled."""


@dataclass(frozen=True)
class Ended:
    """A call as it ended, to be settled once: its log entry (status, bytes, times, error,
    usage, outcome), and what it used."""

    entry: dict[str, object]
    held: Reservation
    failure: str | None
    """Why it failed at the provider, if it did (None: answered)."""
    tokens: Tokens | None = None
    cost: float | None = None
    cut_short: bool = False
    """The controller closed the connection before the answer's end."""


@dataclass
class _Count:
    """A streamed call's counting, done once: before its last bytes reach the controller."""

    reader: UsageReader
    entry: dict[str, object]
    started: float
    call: Outgoing
    failure: str | None = None
    done: bool = False


class StreamRelay:
    """Answers the controller with what the provider said, one call at a time per thread."""

    def __init__(
        self,
        kind: str,
        sender: Sender,
        settle: Callable[[Ended], None],
        answered: Callable[[], None],
    ) -> None:
        self.kind = kind
        self._sender = sender
        self._settle = settle
        self._answered = answered  # told when a good answer's first bytes come

    def forward(self, handler: BaseHTTPRequestHandler, call: Outgoing) -> None:
        """Send `call` and answer `handler` with what the provider said (or why nothing)."""
        entry: dict[str, object] = {"kind": "call", "method": "POST", "path": call.path}
        entry.update(status=None, bytes_up=len(call.body), bytes_down=0, error=None, usage=None)
        entry.update(call.notes)
        started = time.monotonic()
        sent = self._sender.send_with_retries(
            call.path, call.query, call.body, call.headers, started
        )
        if sent.retries:
            entry["retries"] = sent.retries
        if sent.answer is None:
            error = sent.error or "unreachable"
            self._done(entry, started, call, failure=error)
            self._answer_error(handler, 502, f"the provider is unreachable ({error})")
            return
        conn, answer = sent.answer
        entry["status"] = answer.status
        if answer.status >= 300:
            self._relay_error(handler, conn, answer, entry, started, call)
            return
        self._stream(handler, conn, answer, entry, started, call)

    def _answer_error(self, handler: BaseHTTPRequestHandler, status: int, message: str) -> None:
        """An error of the relay's own, in the provider's format."""
        data = error_body(self.kind, status, f"ari relay: {message}")
        try:
            handler.send_response(status)
            handler.send_header("content-type", "application/json")
            handler.send_header("content-length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)
            handler.wfile.flush()
        except OSError:
            handler.close_connection = True

    def _head(self, handler: BaseHTTPRequestHandler, answer: http.client.HTTPResponse) -> None:
        handler.send_response(answer.status, answer.reason)
        for name, value in answer.getheaders():
            if name.lower() not in DROPPED_BACK:
                handler.send_header(name, value)

    def _relay_error(
        self,
        handler: BaseHTTPRequestHandler,
        conn: http.client.HTTPConnection,
        answer: http.client.HTTPResponse,
        entry: dict[str, object],
        started: float,
        call: Outgoing,
    ) -> None:
        """An error answer: small, read whole, passed on with the key (should the provider
        quote it) blanked."""
        try:
            data = answer.read(MAX_ERROR_BODY)
            complete = answer.isclosed() or answer.length == 0
        except (OSError, http.client.HTTPException) as e:
            data, complete = b"", False
            entry["error"] = f"{type(e).__name__}: {short(e)}"
        entry["bytes_down"] = len(data)
        entry["ttfb_s"] = round(time.monotonic() - started, 4)
        self._sender.release(conn, complete and not answer.will_close)
        data = self._sender.redact(data)
        status = answer.status
        failure = f"HTTP {status}" if is_failure(status) else None
        retry = answer.getheader("retry-after")
        if retry:
            entry["retry_after"] = retry[:40]
        self._done(entry, started, call, failure=failure)
        try:
            self._head(handler, answer)
            handler.send_header("content-length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)
            handler.wfile.flush()
        except OSError:
            handler.close_connection = True

    def _stream(
        self,
        handler: BaseHTTPRequestHandler,
        conn: http.client.HTTPConnection,
        answer: http.client.HTTPResponse,
        entry: dict[str, object],
        started: float,
        call: Outgoing,
    ) -> None:
        """A good answer, passed on chunk by chunk as it comes (no buffering: SSE). The call is
        counted, logged and settled before the controller can have the whole answer (before
        the chunk that completes a known length, or before the chunked stream's end): a
        scaffold that reads it and exits, and the teardown that reads the counts, miss
        nothing."""
        reader = UsageReader(answer.getheader("content-type") or "")
        length = answer.getheader("content-length")
        chunked = length is None
        expected = answer.length  # the body's length where the provider gave it
        count = _Count(reader, entry, started, call)
        client_gone = False
        down = 0
        try:
            self._head(handler, answer)
            if chunked:
                handler.send_header("transfer-encoding", "chunked")
            else:
                handler.send_header("content-length", str(length))
            handler.end_headers()
            handler.wfile.flush()
        except OSError:
            client_gone = True
        while not client_gone:
            try:
                data = answer.read1(65536)
            except (OSError, http.client.HTTPException) as e:
                count.failure = f"the answer broke off: {type(e).__name__}: {short(e)}"
                break
            if not data:
                break
            if down == 0:
                entry["ttfb_s"] = round(time.monotonic() - started, 4)
                self._answered()
            down += len(data)
            reader.feed(data)
            if expected is not None and down >= expected:  # (None: chunked)
                self._count(count, down, client_gone=False)  # this chunk completes the answer
            try:
                handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
                handler.wfile.flush()
            except OSError:
                client_gone = True
        self._count(count, down, client_gone)  # no-op where counted above
        if not client_gone and count.failure is None and chunked:
            try:
                handler.wfile.write(b"0\r\n\r\n")
                handler.wfile.flush()
            except OSError:
                client_gone = True
        complete = count.failure is None and not client_gone and answer.isclosed()
        self._sender.release(conn, complete and not answer.will_close)
        if count.failure is not None or client_gone:
            handler.close_connection = True

    def _count(self, count: _Count, down: int, client_gone: bool) -> None:
        """Count, log and settle a streamed call once, with what was read of it."""
        if count.done:
            return
        count.done = True
        reader, entry = count.reader, count.entry
        reader.finish()
        entry["bytes_down"] = down
        tokens = reader.tokens()
        if tokens is not None:
            entry["usage"] = tokens.as_dict()
        failure = count.failure
        if reader.error and failure is None:
            failure = short(reader.error)
        if client_gone:
            entry["error"] = "the controller closed the connection"
        self._done(
            entry,
            count.started,
            count.call,
            failure=failure,
            tokens=tokens,
            cost=reader.cost(),
            cut_short=client_gone,
        )

    def _done(
        self,
        entry: dict[str, object],
        started: float,
        call: Outgoing,
        *,
        failure: str | None,
        tokens: Tokens | None = None,
        cost: float | None = None,
        cut_short: bool = False,
    ) -> None:
        """The call's times and outcome in its entry, then it is settled."""
        now = time.monotonic()
        entry["duration_s"] = round(now - started, 4)
        entry["relay_s"] = round(started - call.arrived, 4)
        if failure is not None:
            entry["error"] = entry.get("error") or failure
        entry["outcome"] = "provider-failure" if failure else "answered"
        self._settle(Ended(entry, call.held, failure, tokens, cost, cut_short))
