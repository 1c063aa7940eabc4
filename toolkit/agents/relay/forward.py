"""The way to the provider (`Forwarder`): where it is (`Upstream`), the pooled connections, the
headers a call gets (the caller's that the policy kept, the relay's own, the real key: the key
stays in here), one send, the sends again while the provider answers "not now" (`retry`),
and the harness's own one-off exchange (the verdict's probe). `Hold` is the switch that holds
the controller's calls while the verdict waits out a rate limit.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

from toolkit.agents.provider_api import Credential
from toolkit.agents.relay.accounting import short
from toolkit.agents.relay.retry import RETRY_STATUSES, RetryPolicy, retry_after_s

CONNECT_TIMEOUT_S = 15.0

READ_TIMEOUT_S = 600.0  # a provider silent this long in the middle of an answer has failed

MAX_ERROR_BODY = 2**20

MAX_IDLE_UPSTREAM = 4

HOLD_MAX_S = 900.0

USER_AGENT = "ari-bench-relay"


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


class Hold:
    """Whether the controller's calls are held: a call waits (at most `HOLD_MAX_S`) while
    the verdict's probe waits out a rate limit, so that a model spending the limit itself
    cannot make the probe fail."""

    def __init__(self) -> None:
        self._open = threading.Event()
        self._open.set()

    def hold(self) -> bool:
        """Hold the calls; True if they were not held already."""
        if not self._open.is_set():
            return False
        self._open.clear()
        return True

    def release(self) -> None:
        self._open.set()

    @property
    def held(self) -> bool:
        return not self._open.is_set()

    def wait(self, timeout_s: float = HOLD_MAX_S) -> None:
        """Until the calls are released (or `timeout_s`)."""
        self._open.wait(timeout_s)


class RetryBooks(Protocol):
    """What the forwarder tells the books of a dropped answer."""

    def record(self, entry: dict[str, object], force: bool = False) -> None: ...

    def count_dropped(self, bytes_up: int, bytes_down: int) -> None: ...


@dataclass
class Sent:
    """A call's last send: the connection and the answer's head, or why there is none."""

    answer: tuple[http.client.HTTPConnection, http.client.HTTPResponse] | None = None
    error: str | None = None
    transient: bool = False
    """No answer, for a reason that may pass (refused, reset, timed out)."""
    retries: int = 0


@dataclass(frozen=True)
class Exchange:
    """The provider's whole answer to a one-off call of the harness's own."""

    status: int
    retry_after: str | None
    body: bytes


class Forwarder:
    """Sends calls to the provider with the real key, pooling connections; `stop()` ends
    retry waits and the pool."""

    def __init__(
        self,
        upstream: Upstream,
        credential: Credential,
        key: str,
        *,
        books: RetryBooks,
        hold: Hold,
        retry: RetryPolicy | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.upstream = upstream
        self.retry = retry or RetryPolicy()
        self._credential = credential
        self._key = key
        self._books = books
        self._hold = hold
        self._ssl = ssl_context or ssl.create_default_context()
        self._lock = threading.Lock()
        self._idle: list[http.client.HTTPConnection] = []
        self._stop = threading.Event()  # set when the relay closes: retry waits end

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def stop(self) -> None:
        """No more sends: retry waits end, idle connections close (calls under way finish)."""
        self._stop.set()
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def redact(self, data: bytes) -> bytes:
        """`data` with the key (should the provider quote it) blanked."""
        return data.replace(self._key.encode(), b"[redacted]") if self._key else data

    def redact_text(self, text: str) -> str:
        return text.replace(self._key, "[redacted]") if self._key else text

    def headers(self, chosen: dict[str, str], length: int) -> dict[str, str]:
        """The headers the provider gets: the caller's that the policy kept, and the relay's."""
        headers = dict(chosen)
        headers["Host"] = self.upstream.netloc
        headers["Content-Type"] = "application/json"
        headers["User-Agent"] = USER_AGENT
        headers["Accept-Encoding"] = "identity"  # plain bytes: the usage is read on the way
        headers["Content-Length"] = str(length)
        headers[self._credential.header] = self._credential.prefix + self._key
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

    def release(self, conn: http.client.HTTPConnection, reusable: bool) -> None:
        """A connection done with: back to the pool if it can take another call."""
        with self._lock:
            if reusable and not self.stopped and len(self._idle) < MAX_IDLE_UPSTREAM:
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

    def exchange(
        self, path: str, body: bytes, extra: dict[str, str], timeout_s: float | None = None
    ) -> Exchange:
        """One call of the harness's own on a fresh connection, its answer read whole (never
        held, never retried); `timeout_s` bounds its connect and each read. Raises `OSError`,
        `http.client.HTTPException` or `ssl.SSLError` when there is no answer."""
        headers = {"Content-Type": "application/json", "Host": self.upstream.netloc, **extra}
        headers["Accept-Encoding"] = "identity"
        headers["User-Agent"] = USER_AGENT
        headers[self._credential.header] = self._credential.prefix + self._key
        conn, _ = self._connection(fresh=True, timeout_s=timeout_s)
        try:
            conn.request("POST", self._target(path, ""), body=body, headers=headers)
            answer = conn.getresponse()
            said = answer.read(MAX_ERROR_BODY)
        finally:
            conn.close()
        return Exchange(answer.status, answer.getheader("retry-after"), said)

    def _attempt(self, path: str, query: str, body: bytes, headers: dict[str, str]) -> Sent:
        """One send of a call: the answer's head, or why there is none."""
        try:
            return Sent(answer=self._send("POST", self._target(path, query), body, headers))
        except (OSError, http.client.HTTPException, ssl.SSLError) as e:
            # Refused, reset, timed out: maybe not next time. A certificate, a name that does
            # not resolve, a protocol error: the same next time.
            transient = isinstance(e, (ConnectionError, TimeoutError))
            return Sent(error=f"unreachable: {type(e).__name__}: {short(e)}", transient=transient)

    def send_with_retries(
        self, path: str, query: str, body: bytes, headers: dict[str, str], started: float
    ) -> Sent:
        """The call sent, and sent again while the provider answers "not now"
        (`retry`): the first answer worth passing on, or the last failure. Nothing of
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
            if self.stopped or not self.retry.allows(retries + 1, elapsed, wait):
                return sent  # passed on (an error answer) or failed, as without retries
            dropped = self._drop(sent)
            retries += 1
            self._books.count_dropped(len(body), dropped)
            self._books.record(
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
            if not stopped and self._hold.held:  # the probe holds the controller's
                self._hold.wait()  # calls: so this one too
            if stopped or self.stopped:  # the dropped answer cannot be passed on: say why
                return Sent(error=f"{why}, then the run ended before a retry", retries=retries)

    def _drop(self, sent: Sent) -> int:
        """Read and drop a "not now" answer before the call is sent again; its size."""
        if sent.answer is None:
            return 0
        conn, answer = sent.answer
        try:
            data = answer.read(MAX_ERROR_BODY)
            complete = answer.isclosed() or answer.length == 0
        except (OSError, http.client.HTTPException):
            data, complete = b"", False
        self.release(conn, complete and not answer.will_close)
        return len(data)
