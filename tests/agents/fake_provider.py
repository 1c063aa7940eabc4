"""A scripted model provider: an OpenAI-compatible chat-completions server on the host.

The "model" is a plain function of the conversation (`Script`): given the request's messages it
returns a `Reply` (tool calls, text, or an HTTP error), streamed back the way OpenAI streams
(server-sent events, a final chunk with the usage). The server records every request (body,
headers, time) and what usage it reported, so tests can compare with what the harness summed.
It also times each tool call: when the reply carrying it was sent, and when the request with
its result came back (the benchmark's per-step overhead).
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

TLS_DIR = Path(__file__).with_name("tls")


@dataclass
class Reply:
    """What the scripted model answers to one request."""

    calls: list[tuple[str, dict[str, object]]] = field(default_factory=list)
    """Tool calls (tool name, arguments), in one assistant message."""
    text: str = ""
    status: int = 200
    """Anything but 200: an error answer with that HTTP status, no usage."""
    prompt_tokens: int = 1000
    completion_tokens: int = 40
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    delay_s: float = 0.0
    """Wait this long before answering (a slow provider)."""
    chunk_delay_s: float = 0.0
    """Anything but 0: the stream is sent chunk by chunk (chunked encoding), this far apart."""
    headers: dict[str, str] = field(default_factory=dict)
    """Extra answer headers (e.g. retry-after on a 429)."""
    cost: float | None = None
    """A cost (USD) reported with the usage, as OpenRouter does; None: none."""
    error: bytes = b'{"error": {"message": "scripted failure"}}'
    """The body of an error answer (`status` not 200)."""


@dataclass
class Request:
    """One request as the provider got it."""

    body: dict[str, object]
    headers: dict[str, str]
    arrived: float
    raw: bytes = b""
    """The body's bytes as they arrived."""

    @property
    def messages(self) -> list[dict[str, object]]:
        messages = self.body.get("messages", [])
        return messages if isinstance(messages, list) else []

    @property
    def turn(self) -> int:
        """How many assistant messages came before: which step of the script this is."""
        return sum(1 for m in self.messages if m.get("role") == "assistant")

    def tool_results(self) -> dict[str, str]:
        """Tool results in the conversation, by call id."""
        return {
            str(m.get("tool_call_id")): str(m.get("content"))
            for m in self.messages
            if m.get("role") == "tool"
        }

    def last_result(self) -> str:
        for message in reversed(self.messages):
            if message.get("role") == "tool":
                return str(message.get("content"))
        return ""


Script = Callable[[Request], Reply]


def steps(*replies: Reply | Callable[[Request], Reply]) -> Script:
    """A script that answers the n-th model call with the n-th reply (then: stop)."""

    def script(request: Request) -> Reply:
        if request.turn >= len(replies):
            return Reply(text="Done.")
        reply = replies[request.turn]
        return reply(request) if callable(reply) else reply

    return script


def bash(command: str) -> tuple[str, dict[str, object]]:
    return "bash", {"command": command, "description": command[:40]}


class FakeProvider(ThreadingHTTPServer):
    """The server; `base_url` for a providers.toml entry, `requests` and totals for checks."""

    daemon_threads = True

    def __init__(
        self,
        script: Script,
        host: str = "127.0.0.1",
        address: str | None = None,
        tls: bool = False,
    ):
        self.script = script
        self.tls = tls
        self.host_name = host
        self.requests: list[Request] = []
        self.reported = {"prompt": 0, "completion": 0, "cached": 0, "reasoning": 0}
        self.calls_sent: dict[str, float] = {}  # tool call id -> when its reply was sent
        self.results_back: dict[str, float] = {}  # tool call id -> when its result arrived
        self.chunks_sent: list[float] = []  # when each chunk of a chunk-by-chunk stream left
        self.lock = threading.Lock()
        super().__init__((address or host, 0), _Handler)
        if tls:  # HTTPS with the test CA's certificate for 127.0.0.1 and localhost
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(TLS_DIR / "server.pem")
            self.socket = context.wrap_socket(self.socket, server_side=True)
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)

    def __enter__(self) -> FakeProvider:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def base_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host_name}:{self.port}/v1"

    def agent_requests(self) -> list[Request]:
        """The requests of the agent's own loop (with tools), not e.g. a title request."""
        return [r for r in self.requests if r.body.get("tools")]


def named_host() -> tuple[str, str]:
    """A host name this machine resolves (its own), and the address it resolves to: a
    provider reached by name exercises the name path of the egress gate."""
    name = socket.gethostname()
    try:
        return name, socket.gethostbyname(name)
    except OSError:
        return "localhost", "127.0.0.1"


def _chunk(delta: dict[str, object] | None, finish: str | None = None) -> bytes:
    body: dict[str, object] = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": "fake",
        "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(body).encode() + b"\n\n"


class _Handler(BaseHTTPRequestHandler):
    server: FakeProvider
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # as a real provider: no 40 ms stalls on kept connections

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        arrived = time.monotonic()
        length = int(self.headers.get("content-length", 0))
        raw = self.rfile.read(length)
        body = json.loads(raw or b"{}")
        request = Request(body=body, headers=dict(self.headers), arrived=arrived, raw=raw)
        provider = self.server
        with provider.lock:
            provider.requests.append(request)
            for call_id in request.tool_results():
                provider.results_back.setdefault(call_id, arrived)
        reply = provider.script(request)
        if reply.delay_s:
            time.sleep(reply.delay_s)
        if reply.status != 200:
            self._send(reply.status, "application/json", reply.error, reply.headers)
            return
        turn = len(provider.requests)
        chunks = [_chunk({"role": "assistant", "content": ""})]
        if reply.text:
            chunks.append(_chunk({"content": reply.text}))
        ids = []
        for index, (name, arguments) in enumerate(reply.calls):
            call_id = f"call_{turn}_{index}"
            ids.append(call_id)
            function = {"name": name, "arguments": json.dumps(arguments)}
            tool_call = {"index": index, "id": call_id, "type": "function", "function": function}
            chunks.append(_chunk({"tool_calls": [tool_call]}))
        chunks.append(_chunk({}, "tool_calls" if reply.calls else "stop"))
        usage = {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": reply.cached_tokens},
            "completion_tokens_details": {"reasoning_tokens": reply.reasoning_tokens},
        }
        if reply.cost is not None:
            usage["cost"] = reply.cost
        last = json.loads(_chunk(None)[6:])
        last["usage"] = usage
        chunks.append(b"data: " + json.dumps(last).encode() + b"\n\n")
        chunks.append(b"data: [DONE]\n\n")
        if reply.chunk_delay_s:
            self._stream(chunks, reply.chunk_delay_s)
        else:
            self._send(200, "text/event-stream", b"".join(chunks), reply.headers)
        sent = time.monotonic()
        with provider.lock:
            provider.reported["prompt"] += reply.prompt_tokens
            provider.reported["completion"] += reply.completion_tokens
            provider.reported["cached"] += reply.cached_tokens
            provider.reported["reasoning"] += reply.reasoning_tokens
            for call_id in ids:
                provider.calls_sent[call_id] = sent

    def _stream(self, chunks: list[bytes], gap_s: float) -> None:
        """One SSE event per HTTP chunk, `gap_s` apart; each chunk's send time is recorded."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for index, chunk in enumerate(chunks):
            if index:
                time.sleep(gap_s)
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.flush()
            with self.server.lock:
                self.server.chunks_sent.append(time.monotonic())
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _send(
        self, status: int, content_type: str, data: bytes, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()
