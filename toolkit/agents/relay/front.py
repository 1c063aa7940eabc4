"""The relay's HTTP front: the loopback server the scaffold talks to (`ProviderRelay`), which
reads each request, checks it and rebuilds it (`policy`, with the reasoning effort pinned:
`EffortPin`), admits it against the budget (`budget.Spend`) and hands it to the stream relay
(`stream`), which sends it through the forwarder (`forward`); each call as it ended is settled
here: counted and logged (`accounting`), heard by the verdict (`verdict`), charged to the
budget. The front holds those parts and wires them; each has a narrow interface of its own.
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from toolkit.agents.provider_api import QUERY, Credential, Refused, check_call, check_path
from toolkit.agents.relay.accounting import Accounting, RelayTotals
from toolkit.agents.relay.budget import RelayLimits, Spend
from toolkit.agents.relay.forward import Forwarder, Hold, Upstream
from toolkit.agents.relay.policy import clean, error_body, parse_body, serialize, upstream_headers
from toolkit.agents.relay.retry import RetryPolicy
from toolkit.agents.relay.stream import Ended, Outgoing, StreamRelay
from toolkit.agents.relay.verdict import PROBE_GAP_S, ProbeResult, Verdict

CLIENT_IDLE_S = 300.0

MAX_BODY_BYTES = 16 * 2**20  # a long conversation is a few MiB; each connection may hold one

PARSE_AT_ONCE = 2  # bodies parsed at once: a parsed body can take 25 times its bytes

MAX_CONNECTIONS = 64  # connections from the controller at once; more are closed at once


@dataclass
class _Call:
    """A call ready for the provider: the rebuilt body and headers, what was changed."""

    data: bytes
    headers: dict[str, str]
    notes: dict[str, list[str]]
    output_cap: int


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
            self.relay.accounting.record(
                {"kind": "refused", "error": "too many connections at once"}
            )
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


class EffortPin:
    """The reasoning effort stays the scaffold's: a call may carry a setting seen before any
    answer reached the controller (the model cannot have chosen those), and no other."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._efforts: set[str] = set()
        self._answered = False  # an answer reached the controller: the model can act

    def answered(self) -> None:
        with self._lock:
            self._answered = True

    def allows(self, effort: str) -> bool:
        with self._lock:
            if not self._answered:
                self._efforts.add(effort)  # the scaffold's own setting: nothing else ran yet
            return effort in self._efforts


class ProviderRelay:
    """One run's relay (see the package's docstring). `start()`, then `url` for the scaffold."""

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
        self.model = model
        self.bind = bind
        self.advertise = advertise or bind
        self.limits = limits or RelayLimits()
        self.spend = Spend(self.limits, prices)
        self.accounting = Accounting(log_path, note)
        self.hold = Hold()  # held: the controller's calls wait (the verdict's probe)
        self.forwarder = Forwarder(
            Upstream.parse(base_url),
            credential,
            key,
            books=self.accounting,
            hold=self.hold,
            retry=retry,
            ssl_context=ssl_context,
        )
        self.verdict = Verdict(
            kind=kind,
            model=model,
            prober=self.forwarder,
            books=self.accounting,
            hold=self.hold,
            clock=clock,
            stall_limit_s=stall_limit_s,
            probe_wait_max_s=probe_wait_max_s,
            probe_gap_s=probe_gap_s,
        )
        self.efforts = EffortPin()
        self.streams = StreamRelay(kind, self.forwarder, self._settle, self.efforts.answered)
        self._parsing = threading.BoundedSemaphore(PARSE_AT_ONCE)
        self._lock = threading.Lock()
        self._closed = False
        self._server: _Server | None = None  # listening between `start()` and `close()`

    # -- what the harness reads --------------------------------------------------------

    @property
    def totals(self) -> RelayTotals:
        return self.accounting.totals

    @property
    def upstream(self) -> Upstream:
        return self.forwarder.upstream

    def probe_once(self, timeout_s: float | None = None) -> ProbeResult:
        """The harness's own call, straight to the provider (`Verdict.probe_once`)."""
        return self.verdict.probe_once(timeout_s)

    def problem(self) -> str | None:
        """While the run goes: the confirmed provider failure, if any (`Verdict.problem`)."""
        return self.verdict.problem()

    def final_problem(self, exited: bool) -> str | None:
        """After the agent stopped (`Verdict.final_problem`)."""
        return self.verdict.final_problem(exited)

    # -- its life ----------------------------------------------------------------------

    def start(self) -> ProviderRelay:
        self.accounting.open()
        self._server = _Server(self, (self.bind, 0))
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        up = self.upstream
        self.accounting.record(
            {
                "kind": "start",
                "provider": f"{up.scheme}://{up.netloc}{up.base_path}",
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
        self.forwarder.stop()
        self.hold.release()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        self.accounting.record(self.accounting.summary(self.spend), force=True)
        self.accounting.note(self.accounting.spend_summary(self.spend, self.limits))
        self.accounting.close()

    # -- each call ---------------------------------------------------------------------

    def refuse(
        self,
        handler: BaseHTTPRequestHandler,
        status: int,
        why: str,
        body: bool = True,
        code: str = "ari_relay",
    ) -> None:
        """Answer the controller from the relay itself; nothing goes to the provider."""
        self.accounting.count_refused()
        self.accounting.record(
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
        if self.hold.held:
            self.hold.wait()
        if self._closed:
            self.refuse(handler, 503, "the run is over")
            return
        held, spent = self.spend.admit(call.output_cap, len(call.data))
        if held is None:
            self._budget_spent(handler, str(spent))
            return
        try:
            headers = self.forwarder.headers(call.headers, len(call.data))
            outgoing = Outgoing(path, query, call.data, headers, call.notes, arrived, held)
            self.streams.forward(handler, outgoing)
        finally:
            if not held.settled:  # a call that broke off in the relay itself
                self.spend.settle(held, None, None, answered=False, bytes_moved=0)

    def _prepare(self, handler: BaseHTTPRequestHandler, path: str, body: bytes) -> _Call:
        """The call as the provider will get it, from the body checked and rebuilt (the parsed
        object is dropped on return); `Refused` says why not."""
        parsed = parse_body(body)
        effort = check_call(self.kind, self.model, parsed)
        if not self.efforts.allows(effort):
            raise Refused("the reasoning-effort setting must stay the scaffold's")
        cleaned = clean(self.kind, path, parsed, self.limits.max_output_tokens)
        data = serialize(cleaned.body)  # never the bytes that came in
        headers = upstream_headers(self.kind, handler.headers, cleaned.dropped)
        return _Call(data, headers, cleaned.notes(), cleaned.output_cap)

    def _settle(self, ended: Ended) -> None:
        """A call as it ended: counted, heard by the verdict (a failure starts or continues a
        spell, an answer ends it), charged to the budget with what the provider said it
        used, logged; the budget's end announced once."""
        entry = ended.entry
        self.accounting.count_call(entry, ended.tokens, ended.failure)
        self.verdict.heard(ended.failure)
        moved = int(str(entry["bytes_up"])) + int(str(entry["bytes_down"]))
        answered = ended.failure is None
        spent = self.spend.settle(
            ended.held, ended.tokens, ended.cost, answered, moved, ended.cut_short
        )
        self.accounting.record(entry)
        if spent is not None:
            self.accounting.announce(spent)

    def _budget_spent(self, handler: BaseHTTPRequestHandler, why: str) -> None:
        """The budget is spent: this call (and every later one) gets the relay's error, in the
        provider's format, and never reaches the provider. The run's own doing: no failure."""
        self.accounting.announce(why)
        self.refuse(
            handler,
            400,
            f"{why}; no further model calls are passed on in this run",
            code="ari_budget_spent",
        )
