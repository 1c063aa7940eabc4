"""The provider relay: the controller's only way to the model provider, and the only evidence
that the provider failed.

Why: the scaffold's shell runs the model's commands as the scaffold's own user, so anything in
the controller (its environment, its files, the scaffold's output) is the model's to read and
to forge. So the key never enters the controller, and nothing the controller says decides that
a run failed for want of a provider (an `invalid` run is rerun: a free reroll if a model could
cause it).

Per run the harness starts one relay, a small HTTP server in its own process on a host
loopback port (for `--backend docker`, on the host's address on the network the egress
forwarder leaves by: `relay_endpoint`). The scaffold's provider `baseURL` points at it with a
placeholder key; the controller's egress allow-list holds that one (address, port). For each
request the relay:

- takes only model calls (`provider_api.check_call`): POST to the provider's call endpoints
  under its base path, for the run's model, with no provider-side tools, and with the
  reasoning-effort fields the scaffold sent before any answer reached the controller (the
  model cannot have acted before that); anything else gets a 4xx from the relay itself;
- never forwards the bytes it got (`relay_policy`): the body is parsed strictly (a duplicate
  key, NaN, text that is not UTF-8: refused) and written anew from an allow-list of fields
  per API, with one answer per call and the output capped (`RelayLimits.max_output_tokens`);
  the headers are built anew too, from the caller's only the few the allow-list names, and
  the real key (`Credential`);
- keeps the run's token and cost budget (`relay_budget.Spend`): a call is passed on only
  while it is not spent; once it is, every call gets the relay's error in the provider's
  format and nothing more reaches the provider (the run's own doing: no provider failure);
- sends the call to the provider's base URL (HTTPS with the certificate checked, the
  system's CAs), and streams the answer back as it comes (an SSE stream is passed on chunk by
  chunk, never buffered), reading the provider's own usage counts on the way;
- writes one line to `provider.jsonl` (time, method, path, status, bytes each way, time to
  the first byte, duration, upstream error, usage, what it dropped, pinned or capped; no
  body, no key), and to the harness's `agent.log` when the budget runs out, and the spend at
  the end.

The decision: a spell of calls that failed at the provider (unreachable, a broken answer, 5xx,
429 and the other `provider_api.FAILURE_STATUSES`), with no call answered in between, is a
suspicion when it lasts longer than `stall_limit_s`, or when the scaffold exits during one.
A suspicion is checked by a call of the harness's own (`provider_api.probe`) sent straight to
the provider; on a rate limit the relay first holds the controller's calls and waits as the
provider asks. Only when the probe fails too is the run `invalid` (`problem`/`final_problem`).
So a model that makes its own calls fail (odd requests, a spent rate limit, a killed scaffold)
gets no reroll: a provider that works answers the probe.

Not covered: the model's commands can send model calls of their own through the relay (same
model, same effort, no provider-side tools): they cannot be told apart from the scaffold's,
and they are counted in usage, logged and charged to the budget like them.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from toolkit.agents.provider_api import (
    QUERY,
    Credential,
    Refused,
    Tokens,
    UsageReader,
    check_call,
    check_path,
    is_failure,
    probe,
)
from toolkit.agents.relay_budget import RelayLimits, Reservation, Spend
from toolkit.agents.relay_policy import clean, error_body, parse_body, serialize, upstream_headers
from toolkit.agents.relay_retry import RETRY_STATUSES, RetryPolicy, retry_after_s

LOG_FILE = "provider.jsonl"
CONNECT_TIMEOUT_S = 15.0
READ_TIMEOUT_S = 600.0  # a provider silent this long in the middle of an answer has failed
CLIENT_IDLE_S = 300.0
MAX_BODY_BYTES = 16 * 2**20  # a long conversation is a few MiB; each connection may hold one
PARSE_AT_ONCE = 2  # bodies parsed at once: a parsed body can take 25 times its bytes
MAX_ERROR_BODY = 2**20
MAX_CONNECTIONS = 64  # connections from the controller at once; more are closed at once
MAX_LOG_LINES = 50_000  # then only counters: a flood of refused calls must not fill the disk
MAX_IDLE_UPSTREAM = 4
HOLD_MAX_S = 900.0
PROBE_TRIES = 3
PROBE_GAP_S = 2.0
USER_AGENT = "ari-bench-relay"
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


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _short(text: object, limit: int = 200) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


@dataclass
class Upstream:
    """Where the provider is: the parts of its base URL."""

    scheme: str
    host: str
    port: int
    base_path: str  # "" or "/v1", never with a trailing slash

    @classmethod
    def parse(cls, base_url: str) -> Upstream:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) base URL: {base_url!r}")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return cls(parts.scheme, parts.hostname, port, parts.path.rstrip("/"))

    @property
    def netloc(self) -> str:
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"


@dataclass
class ProbeResult:
    failed: bool
    status: int | None
    error: str | None
    retry_after_s: float | None = None
    detail: str | None = None
    """The provider's own short word on a failed probe (its error message), key blanked."""

    def describe(self) -> str:
        return f"HTTP {self.status}" if self.error is None else str(self.error)


@dataclass
class RelayTotals:
    """What the relay counted: the run's model calls as the provider answered them."""

    calls: int = 0
    answered: int = 0
    failed: int = 0
    refused: int = 0
    bytes_up: int = 0
    bytes_down: int = 0
    with_usage: int = 0
    tokens: Tokens = field(default_factory=Tokens)
    probes: int = 0
    retries: int = 0
    """Sends of a call after its first (`relay_retry`), all calls together."""
    retried_calls: int = 0
    """Calls sent more than once."""


@dataclass
class _Call:
    """A call ready for the provider: the rebuilt body and headers, what was changed."""

    data: bytes
    headers: dict[str, str]
    notes: dict[str, list[str]]
    output_cap: int


@dataclass
class _Sent:
    """A call's last send: the connection and the answer's head, or why there is none."""

    answer: tuple[http.client.HTTPConnection, http.client.HTTPResponse] | None = None
    error: str | None = None
    transient: bool = False
    """No answer, for a reason that may pass (refused, reset, timed out)."""
    retries: int = 0


@dataclass
class _Spell:
    """Calls failing at the provider with none answered in between."""

    since: float
    failures: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    last: str = ""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, relay: ProviderRelay, address: tuple[str, int]) -> None:
        self.relay = relay
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            self.shutdown_request(request)
            self.relay.record({"kind": "refused", "error": "too many connections at once"})
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    timeout = CLIENT_IDLE_S
    disable_nagle_algorithm = True  # each SSE event leaves at once (no 40 ms ACK stalls)

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.server.relay.handle(self)

    def _refuse_method(self) -> None:
        why = f"method {self.command} is not allowed"
        self.server.relay.refuse(self, 405, why, body=self.command != "HEAD")

    do_GET = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_CONNECT = _refuse_method
    do_TRACE = do_HEAD = _refuse_method


class ProviderRelay:
    """One run's relay (see the module docstring). `start()`, then `url` for the scaffold."""

    def __init__(
        self,
        *,
        kind: str,
        base_url: str,
        model: str,
        key: str,
        credential: Credential,
        log_path: Path | None = None,
        stall_limit_s: float | None = None,
        bind: str = "127.0.0.1",
        advertise: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
        probe_wait_max_s: float = 60.0,
        probe_gap_s: float = PROBE_GAP_S,
        clock: Callable[[], float] = time.monotonic,
        limits: RelayLimits | None = None,
        prices: dict[str, float] | None = None,
        note: Callable[[str], None] | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.kind = kind
        self.retry = retry or RetryPolicy()
        self._stop = threading.Event()  # set when the relay closes: retry waits end
        self.limits = limits or RelayLimits()
        self.spend = Spend(self.limits, prices)
        self._note = note
        self._announced = False
        self._parsing = threading.BoundedSemaphore(PARSE_AT_ONCE)
        self.model = model
        self.upstream = Upstream.parse(base_url)
        self.credential = credential
        self.stall_limit_s = stall_limit_s
        self.bind = bind
        self.advertise = advertise or bind
        self.probe_wait_max_s = probe_wait_max_s
        self.probe_gap_s = probe_gap_s
        self.clock = clock
        self._key = key
        self._ssl = ssl_context or ssl.create_default_context()
        self._lock = threading.Lock()
        self._log_path = log_path
        self._log: IO[str] | None = None
        self._log_lines = 0
        self._server: _Server | None = None
        self._idle: list[http.client.HTTPConnection] = []
        self._open = threading.Event()  # cleared: the controller's calls are held
        self._open.set()
        self._closed = False
        self._answered_once = False  # an answer reached the controller: the model can act
        self._efforts: set[str] = set()
        self._spell: _Spell | None = None
        self._checking: threading.Thread | None = None
        self._verdict: str | None = None
        self.totals = RelayTotals()

    # -- life -----------------------------------------------------------------------------------

    def start(self) -> ProviderRelay:
        if self._log_path is not None:
            self._log = self._log_path.open("a", encoding="utf-8")
        self._server = _Server(self, (self.bind, 0))
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self.record(
            {
                "kind": "start",
                "provider": f"{self.upstream.scheme}://{self.upstream.netloc}"
                + self.upstream.base_path,
                "model": self.model,
                "listen": f"{self.bind}:{self.port}",
                "max_output_tokens": self.limits.max_output_tokens,
                "max_tokens_total": self.limits.max_tokens_total,
                "max_cost_usd": self.limits.max_cost_usd,
            }
        )
        return self

    @property
    def port(self) -> int:
        assert self._server is not None, "start() the relay first"
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """The base URL the scaffold is given: the relay, with the provider's base path."""
        return f"http://{self.advertise}:{self.port}{self.upstream.base_path}"

    def close(self) -> None:
        """Stop listening (calls still held are answered 503); the counters stay."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._stop.set()
        self._open.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
        totals = self.totals
        self.record(
            {
                "kind": "summary",
                "calls": totals.calls,
                "answered": totals.answered,
                "failed": totals.failed,
                "refused": totals.refused,
                "bytes_up": totals.bytes_up,
                "bytes_down": totals.bytes_down,
                "with_usage": totals.with_usage,
                "usage": totals.tokens.as_dict(),
                "probes": totals.probes,
                "retries": totals.retries,
                "retried_calls": totals.retried_calls,
                "budget_tokens": self.spend.tokens,
                "cost_usd": self.spend.cost_usd,
                "budget_spent": self.spend.spent is not None,
                "budget_refused": self.spend.refused,
            },
            force=True,
        )
        self.note(self.spend_summary())
        with self._lock:
            if self._log is not None:
                self._log.close()
                self._log = None

    def note(self, message: str) -> None:
        """One line for the harness's `agent.log` (when the harness gave a way to write it)."""
        if self._note is None:
            return
        try:
            self._note(f"provider relay: {message}")
        except Exception:  # a note the harness cannot take must not cost a call or the run
            self.record({"kind": "note-lost", "note": message[:500]})

    def spend_summary(self) -> str:
        spend, limits = self.spend, self.limits
        tokens = f"{spend.tokens:,} tokens counted against the budget"
        tokens += f" of {limits.max_tokens_total:,}" if limits.max_tokens_total else " (no limit)"
        if spend.cost_usd is None:
            cost = "cost unknown (no prices, and the provider reported none)"
        else:
            cost = f"${spend.cost_usd:.4f}"
            cost += f" of ${limits.max_cost_usd:.2f}" if limits.max_cost_usd else " (no limit)"
        ended = (
            f"; budget spent, {spend.refused} call(s) refused ({spend.spent}); not a provider "
            "failure"
            if spend.spent
            else ""
        )
        t = self.totals
        retried = f" ({t.retries} retries for {t.retried_calls} of them)" if t.retries else ""
        return f"{t.calls} model call(s) passed on{retried}; {tokens}; {cost}{ended}"

    def record(self, entry: dict[str, object], force: bool = False) -> None:
        """One line of `provider.jsonl` (metadata only)."""
        line = json.dumps({"time": _now(), **entry}, sort_keys=True)
        with self._lock:
            if self._log is None or (self._log_lines >= MAX_LOG_LINES and not force):
                return
            self._log_lines += 1
            if self._log_lines == MAX_LOG_LINES and not force:
                line = json.dumps({"time": _now(), "kind": "log-full", "after": MAX_LOG_LINES})
            self._log.write(line + "\n")
            self._log.flush()

    # -- one call -------------------------------------------------------------------------------

    def refuse(
        self,
        handler: BaseHTTPRequestHandler,
        status: int,
        why: str,
        body: bool = True,
        code: str = "ari_relay",
    ) -> None:
        """Answer the controller from the relay itself; nothing goes to the provider."""
        with self._lock:
            self.totals.refused += 1
        self.record(
            {
                "kind": "refused",
                "method": handler.command,
                "path": urlsplit(handler.path).path[:300],
                "status": status,
                "error": why,
            }
        )
        data = error_body(self.kind, status, f"ari relay: {why}", code) if body else b""
        try:
            handler.send_response(status)
            handler.send_header("content-type", "application/json")
            handler.send_header("content-length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)
            handler.wfile.flush()
        except OSError:
            pass
        handler.close_connection = True  # whatever the caller sent next is not read

    def _route(self, target: str) -> tuple[str, str]:
        """(path relative to the base path, query to pass on) or `Refused`."""
        if not target.startswith("/") or target.startswith("//"):
            raise Refused("only paths on the provider are relayed")
        parts = urlsplit(target)
        path = parts.path
        if "%" in path or "\\" in path or any(s in (".", "..") for s in path.split("/")):
            raise Refused("encoded or relative path segments are not relayed")
        base = self.upstream.base_path + "/"
        if not path.startswith(base):
            raise Refused(f"only paths under {base} are relayed")
        allowed = QUERY.get(self.kind, frozenset())
        query = [(k, v) for k, v in parse_qsl(parts.query) if k in allowed]
        return path[len(base) :], urlencode(query)

    def _read_body(self, handler: BaseHTTPRequestHandler) -> bytes:
        if handler.headers.get("transfer-encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            total = 0
            while True:
                size = int(handler.rfile.readline(100).split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while handler.rfile.readline(1000).strip():
                        pass
                    return b"".join(chunks)
                total += size
                if total > MAX_BODY_BYTES:
                    raise Refused("the request body is too large")
                chunks.append(handler.rfile.read(size))
                handler.rfile.readline(10)
        length = int(handler.headers.get("content-length") or 0)
        if length > MAX_BODY_BYTES:
            raise Refused("the request body is too large")
        return handler.rfile.read(length) if length > 0 else b""

    def handle(self, handler: BaseHTTPRequestHandler) -> None:
        """One request from the controller: check it, relay it, record it."""
        arrived = time.monotonic()
        try:
            body = self._read_body(handler)
        except Refused as e:
            self.refuse(handler, 413, str(e))
            return
        except (ValueError, OSError):
            self.refuse(handler, 400, "malformed request")
            return
        try:
            path, query = self._route(handler.path)
            check_path(self.kind, self.model, path)
            with self._parsing:  # a parsed body takes many times its bytes: a few at once
                call = self._prepare(handler, path, body)
        except Refused as e:
            self.refuse(handler, e.status, str(e))
            return
        del body  # what came in is not kept while the call goes on
        if not self._open.is_set():
            self._open.wait(HOLD_MAX_S)
        if self._closed:
            self.refuse(handler, 503, "the run is over")
            return
        held, spent = self.spend.admit(call.output_cap, len(call.data))
        if held is None:
            self._budget_spent(handler, str(spent))
            return
        try:
            headers = self._upstream_headers(call.headers, len(call.data))
            self._forward(handler, path, query, call.data, headers, call.notes, arrived, held)
        finally:
            if not held.settled:  # a call that broke off in the relay itself
                self.spend.settle(held, None, None, answered=False, bytes_moved=0)

    def _prepare(self, handler: BaseHTTPRequestHandler, path: str, body: bytes) -> _Call:
        """The call as the provider will get it, from the body checked and rebuilt (the parsed
        object is dropped on return); `Refused` says why not."""
        parsed = parse_body(body)
        effort = check_call(self.kind, self.model, parsed)
        with self._lock:
            if not self._answered_once:
                self._efforts.add(effort)  # the scaffold's own setting: nothing else ran yet
            pinned = effort in self._efforts
        if not pinned:
            raise Refused("the reasoning-effort setting must stay the scaffold's")
        cleaned = clean(self.kind, path, parsed, self.limits.max_output_tokens)
        data = serialize(cleaned.body)  # never the bytes that came in
        headers = upstream_headers(self.kind, handler.headers, cleaned.dropped)
        return _Call(data, headers, cleaned.notes(), cleaned.output_cap)

    def _budget_spent(self, handler: BaseHTTPRequestHandler, why: str) -> None:
        """The budget is spent: this call (and every later one) gets the relay's error, in the
        provider's format, and never reaches the provider. The run's own doing: no failure."""
        self._announce(why)
        self.refuse(
            handler,
            400,
            f"{why}; no further model calls are passed on in this run",
            code="ari_budget_spent",
        )

    def _upstream_headers(self, chosen: dict[str, str], length: int) -> dict[str, str]:
        """The headers the provider gets: the caller's that the policy kept, and the relay's."""
        headers = dict(chosen)
        headers["Host"] = self.upstream.netloc
        headers["Content-Type"] = "application/json"
        headers["User-Agent"] = USER_AGENT
        headers["Accept-Encoding"] = "identity"  # plain bytes: the usage is read on the way
        headers["Content-Length"] = str(length)
        headers[self.credential.header] = self.credential.prefix + self._key
        return headers

    def _connection(
        self, fresh: bool, timeout_s: float | None = None
    ) -> tuple[http.client.HTTPConnection, bool]:
        """A connection to the provider (pooled unless `fresh`); `timeout_s` bounds the
        connect and every read (default: `CONNECT_TIMEOUT_S`, then `READ_TIMEOUT_S`)."""
        if not fresh:
            with self._lock:
                if self._idle:
                    return self._idle.pop(), True
        up = self.upstream
        conn: http.client.HTTPConnection
        connect_s = CONNECT_TIMEOUT_S if timeout_s is None else min(timeout_s, CONNECT_TIMEOUT_S)
        if up.scheme == "https":
            conn = http.client.HTTPSConnection(
                up.host, up.port, timeout=connect_s, context=self._ssl
            )
        else:
            conn = http.client.HTTPConnection(up.host, up.port, timeout=connect_s)
        conn.connect()
        assert conn.sock is not None
        conn.sock.settimeout(READ_TIMEOUT_S if timeout_s is None else timeout_s)
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn, False

    def _release(self, conn: http.client.HTTPConnection, reusable: bool) -> None:
        with self._lock:
            if reusable and not self._closed and len(self._idle) < MAX_IDLE_UPSTREAM:
                self._idle.append(conn)
                return
        conn.close()

    def _send(
        self, method: str, target: str, body: bytes, headers: dict[str, str]
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """The request sent and the answer's head read; a pooled connection the provider had
        closed meanwhile is retried once on a fresh one."""
        for fresh in (False, True):
            conn, reused = self._connection(fresh)
            try:
                conn.request(method, target, body=body, headers=headers)
                return conn, conn.getresponse()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                conn.close()
                if not reused:
                    raise
            except BaseException:
                conn.close()
                raise
        raise AssertionError("unreachable")

    def _target(self, path: str, query: str) -> str:
        return f"{self.upstream.base_path}/{path}" + (f"?{query}" if query else "")

    def _forward(
        self,
        handler: BaseHTTPRequestHandler,
        path: str,
        query: str,
        body: bytes,
        headers: dict[str, str],
        notes: dict[str, list[str]],
        arrived: float,
        held: Reservation,
    ) -> None:
        entry: dict[str, object] = {"kind": "call", "method": "POST", "path": path}
        entry.update(status=None, bytes_up=len(body), bytes_down=0, error=None, usage=None)
        entry.update(notes)
        started = time.monotonic()
        sent = self._send_with_retries(path, query, body, headers, started)
        if sent.retries:
            entry["retries"] = sent.retries
        if sent.answer is None:
            error = sent.error or "unreachable"
            self._done(entry, started, arrived, held, failure=error)
            self._answer_error(handler, 502, f"the provider is unreachable ({error})")
            return
        conn, answer = sent.answer
        entry["status"] = answer.status
        if answer.status >= 300:
            self._relay_error(handler, conn, answer, entry, started, arrived, held)
            return
        self._stream(handler, conn, answer, entry, started, arrived, held)

    def _attempt(self, path: str, query: str, body: bytes, headers: dict[str, str]) -> _Sent:
        """One send of a call: the answer's head, or why there is none."""
        try:
            return _Sent(answer=self._send("POST", self._target(path, query), body, headers))
        except (OSError, http.client.HTTPException, ssl.SSLError) as e:
            # Refused, reset, timed out: maybe not next time. A certificate, a name that does
            # not resolve, a protocol error: the same next time.
            transient = isinstance(e, (ConnectionError, TimeoutError))
            return _Sent(error=f"unreachable: {type(e).__name__}: {_short(e)}", transient=transient)

    def _send_with_retries(
        self, path: str, query: str, body: bytes, headers: dict[str, str], started: float
    ) -> _Sent:
        """The call sent, and sent again while the provider answers "not now"
        (`relay_retry`): the first answer worth passing on, or the last failure. Nothing of
        a dropped answer reaches the controller; each retry is one line of the log."""
        retries = 0
        while True:
            sent = self._attempt(path, query, body, headers)
            sent.retries = retries
            hint: float | None = None
            if sent.answer is not None:
                answer = sent.answer[1]
                if answer.status not in RETRY_STATUSES:
                    return sent
                hint = retry_after_s(
                    answer.getheader("retry-after"), answer.getheader("retry-after-ms")
                )
                why = f"HTTP {answer.status}"
            elif sent.transient:
                why = sent.error or "unreachable"
            else:
                return sent
            wait = self.retry.wait_s(retries + 1, hint)
            elapsed = time.monotonic() - started
            if self._closed or not self.retry.allows(retries + 1, elapsed, wait):
                return sent  # passed on (an error answer) or failed, as without retries
            dropped = self._drop(sent)
            retries += 1
            with self._lock:
                self.totals.bytes_up += len(body)
                self.totals.bytes_down += dropped
            self.record(
                {
                    "kind": "retry",
                    "path": path,
                    "retry": retries,
                    "after": why,
                    "bytes_down": dropped,
                    "wait_s": round(wait, 3),
                }
            )
            stopped = self._stop.wait(wait)
            if not stopped and not self._open.is_set():  # the probe holds the controller's
                self._open.wait(HOLD_MAX_S)  # calls: so this one too
            if stopped or self._closed:  # the dropped answer cannot be passed on: say why
                return _Sent(error=f"{why}, then the run ended before a retry", retries=retries)

    def _drop(self, sent: _Sent) -> int:
        """Read and drop a "not now" answer before the call is sent again; its size."""
        if sent.answer is None:
            return 0
        conn, answer = sent.answer
        try:
            data = answer.read(MAX_ERROR_BODY)
            complete = answer.isclosed() or answer.length == 0
        except (OSError, http.client.HTTPException):
            data, complete = b"", False
        self._release(conn, complete and not answer.will_close)
        return len(data)

    def _answer_error(self, handler: BaseHTTPRequestHandler, status: int, message: str) -> None:
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
        arrived: float,
        held: Reservation,
    ) -> None:
        """An error answer: small, read whole, passed on with the key (should the provider
        quote it) blanked."""
        try:
            data = answer.read(MAX_ERROR_BODY)
            complete = answer.isclosed() or answer.length == 0
        except (OSError, http.client.HTTPException) as e:
            data, complete = b"", False
            entry["error"] = f"{type(e).__name__}: {_short(e)}"
        entry["bytes_down"] = len(data)
        entry["ttfb_s"] = round(time.monotonic() - started, 4)
        self._release(conn, complete and not answer.will_close)
        data = data.replace(self._key.encode(), b"[redacted]")
        status = answer.status
        failure = f"HTTP {status}" if is_failure(status) else None
        retry = answer.getheader("retry-after")
        if retry:
            entry["retry_after"] = retry[:40]
        self._done(entry, started, arrived, held, failure=failure)
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
        arrived: float,
        held: Reservation,
    ) -> None:
        """A good answer, passed on chunk by chunk as it comes (no buffering: SSE)."""
        reader = UsageReader(answer.getheader("content-type") or "")
        length = answer.getheader("content-length")
        chunked = length is None
        failure: str | None = None
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
                failure = f"the answer broke off: {type(e).__name__}: {_short(e)}"
                break
            if not data:
                break
            if down == 0:
                entry["ttfb_s"] = round(time.monotonic() - started, 4)
                with self._lock:
                    self._answered_once = True
            down += len(data)
            reader.feed(data)
            try:
                handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
                handler.wfile.flush()
            except OSError:
                client_gone = True
        if not client_gone and failure is None and chunked:
            try:
                handler.wfile.write(b"0\r\n\r\n")
                handler.wfile.flush()
            except OSError:
                client_gone = True
        complete = failure is None and not client_gone and answer.isclosed()
        self._release(conn, complete and not answer.will_close)
        if failure is not None or client_gone:
            handler.close_connection = True
        reader.finish()
        entry["bytes_down"] = down
        tokens = reader.tokens()
        if tokens is not None:
            entry["usage"] = tokens.as_dict()
        if reader.error and failure is None:
            failure = _short(reader.error)
        if client_gone:
            entry["error"] = "the controller closed the connection"
        self._done(
            entry,
            started,
            arrived,
            held,
            failure=failure,
            tokens=tokens,
            cost=reader.cost(),
            cut_short=client_gone,
        )

    def _done(
        self,
        entry: dict[str, object],
        started: float,
        arrived: float,
        held: Reservation,
        *,
        failure: str | None,
        tokens: Tokens | None = None,
        cost: float | None = None,
        cut_short: bool = False,
    ) -> None:
        """Count and log one call; a failure starts or continues a spell, an answer ends it.
        What the provider said it used goes to the budget."""
        now = time.monotonic()
        entry["duration_s"] = round(now - started, 4)
        entry["relay_s"] = round(started - arrived, 4)
        if failure is not None:
            entry["error"] = entry.get("error") or failure
        entry["outcome"] = "provider-failure" if failure else "answered"
        retries = int(str(entry.get("retries", 0)))
        with self._lock:
            t = self.totals
            t.calls += 1
            t.retries += retries
            t.retried_calls += 1 if retries else 0
            t.bytes_up += int(str(entry["bytes_up"]))
            t.bytes_down += int(str(entry["bytes_down"]))
            if tokens is not None:
                t.with_usage += 1
                t.tokens.add(tokens)
            if failure is None:
                t.answered += 1
                self._spell = None
            else:
                t.failed += 1
                if self._spell is None:
                    self._spell = _Spell(since=self.clock())
                spell = self._spell
                spell.failures += 1
                spell.kinds[failure.split(":", 1)[0]] += 1
                spell.last = failure
        moved = int(str(entry["bytes_up"])) + int(str(entry["bytes_down"]))
        answered = failure is None
        spent = self.spend.settle(held, tokens, cost, answered, moved, cut_short)
        self.record(entry)
        if spent is not None:
            self._announce(spent)

    def _announce(self, why: str) -> None:
        """Say once, in `provider.jsonl` and `agent.log`, that the budget is spent."""
        with self._lock:
            if self._announced:
                return
            self._announced = True
        self.record({"kind": "budget", "spent": why})
        self.note(f"{why}: further model calls are refused (the run stays valid)")

    # -- the harness's own probe ----------------------------------------------------------------

    def probe_once(self, timeout_s: float | None = None) -> ProbeResult:
        """One minimal call of the harness's own, straight to the provider (never held, never
        retried); `timeout_s` bounds its connect and each read (default: the relay's)."""
        path, body, extra = probe(self.kind, self.model)
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "Host": self.upstream.netloc, **extra}
        headers["Accept-Encoding"] = "identity"
        headers["User-Agent"] = USER_AGENT
        headers[self.credential.header] = self.credential.prefix + self._key
        started = time.monotonic()
        result: ProbeResult
        try:
            conn, _ = self._connection(fresh=True, timeout_s=timeout_s)
            try:
                conn.request("POST", self._target(path, ""), body=data, headers=headers)
                answer = conn.getresponse()
                said = answer.read(MAX_ERROR_BODY)
            finally:
                conn.close()
            retry = retry_after_s(answer.getheader("retry-after"))
            failed = is_failure(answer.status)
            detail = self._error_detail(said) if failed else None
            result = ProbeResult(failed, answer.status, None, retry, detail)
        except (OSError, http.client.HTTPException, ssl.SSLError) as e:
            result = ProbeResult(True, None, f"unreachable: {type(e).__name__}: {_short(e)}")
        with self._lock:
            self.totals.probes += 1
        self.record(
            {
                "kind": "probe",
                "method": "POST",
                "path": path,
                "status": result.status,
                "error": result.error,
                "outcome": "provider-failure" if result.failed else "answered",
                "duration_s": round(time.monotonic() - started, 4),
            }
        )
        return result

    def _error_detail(self, data: bytes) -> str | None:
        """The message of a provider's error answer, short, with the key blanked."""
        text = data.decode("utf-8", errors="replace")
        try:
            parsed: object = json.loads(text)
        except ValueError:
            parsed = text
        for step in ("error", "message"):  # {"error": {"message": ...}}, {"message": ...}
            if isinstance(parsed, dict) and step in parsed:
                parsed = parsed[step]
        if isinstance(parsed, dict):
            parsed = parsed.get("message", json.dumps(parsed))
        said = "".join(c if c.isprintable() else " " for c in str(parsed))  # no escapes
        said = " ".join((said.replace(self._key, "[redacted]") if self._key else said).split())
        return _short(said, 120) if said else None

    def _confirm(self, hold: bool) -> ProbeResult | None:
        """Ask the provider ourselves, up to `PROBE_TRIES` times; None: it works. On a rate
        limit the controller's calls are held meanwhile (`hold`), so that a model spending the
        limit itself cannot make the probe fail."""
        result: ProbeResult | None = None
        for attempt in range(PROBE_TRIES):
            result = self.probe_once()
            if not result.failed:
                return None
            if attempt == PROBE_TRIES - 1:
                break
            wait = self.probe_gap_s
            if result.status == 429:
                wait = result.retry_after_s or self.probe_wait_max_s / 2
                if hold and self._open.is_set():
                    self._open.clear()
                    self.record({"kind": "hold", "why": "rate limited: the probe waits"})
            time.sleep(min(max(wait, self.probe_gap_s), self.probe_wait_max_s))
        return result

    # -- the decision ---------------------------------------------------------------------------

    def _spell_text(self, spell: _Spell) -> str:
        kinds = ", ".join(f"{k} x{n}" for k, n in spell.kinds.most_common(4))
        lasted = self.clock() - spell.since
        return (
            f"{spell.failures} model call(s) in a row failed at the provider over {lasted:.0f}s "
            f"({kinds}; last: {spell.last})"
        )

    def problem(self) -> str | None:
        """While the run goes: the confirmed provider failure, if any. A spell longer than the
        stall limit starts a check in the background (the caller polls)."""
        with self._lock:
            if self._verdict or self._checking is not None:
                return self._verdict
            spell = self._spell
            if spell is None or self.stall_limit_s is None:
                return None
            if self.clock() - spell.since <= self.stall_limit_s:
                return None
            thread = threading.Thread(target=self._check, args=(True,), daemon=True)
            self._checking = thread
        thread.start()
        return None

    def _check(self, hold: bool) -> None:
        with self._lock:
            spell = self._spell
        text = self._spell_text(spell) if spell else "calls failed at the provider"
        failed = self._confirm(hold)
        with self._lock:
            self._checking = None
            if failed is not None:
                self._verdict = (
                    f"the model provider failed: {text}; the harness's own probe call failed "
                    f"too ({failed.describe()}): infrastructure, rerun"
                )
            elif self._spell is spell:
                self._spell = None  # the provider works: those failures were the calls' own
        if failed is None:
            self.record({"kind": "cleared", "why": f"the probe was answered after: {text}"})
            self._open.set()

    def final_problem(self, exited: bool) -> str | None:
        """After the agent stopped: the confirmed provider failure, if any. A scaffold that
        exited during a spell, or a spell past the limit, is checked now (nothing of the
        controller is left to interfere)."""
        thread = self._checking
        if thread is not None:
            thread.join(timeout=self.probe_wait_max_s * PROBE_TRIES + 120)
        with self._lock:
            if self._verdict:
                return self._verdict
            spell = self._spell
        if spell is None:
            return None
        long = self.stall_limit_s is not None and self.clock() - spell.since > self.stall_limit_s
        if not (exited or long):
            return None
        text = self._spell_text(spell)
        failed = self._confirm(hold=False)
        if failed is None:
            self.record({"kind": "cleared", "why": f"the probe was answered after: {text}"})
            return None
        lead = (
            "the scaffold stopped while the model provider was failing"
            if exited
            else ("the model provider failed")
        )
        return (
            f"{lead}: {text}; the harness's own probe call failed too ({failed.describe()}): "
            "infrastructure, rerun"
        )
