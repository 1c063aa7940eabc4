"""What the provider relay must know of each provider API (kinds of `providers.toml`).

The relay (`relay/`) stands between the controller and the model provider and holds the key.
Per kind it needs to know:

- where a model call goes: the endpoints under the base URL the scaffold uses (checked against
  opencode's own requests), and the query parameters they take; everything else is refused,
  so the key cannot reach the provider's file, batch, fine-tuning or admin endpoints;
- how the key travels (`Credential`, a header; `providers.toml` may name another one), and
  which incoming headers could carry one (all stripped before the real one is set);
- what a call may ask for (`check_call`): the run's model and no other (a weaker model must
  not get help from a stronger one on the operator's key), no tool that runs at the provider
  (web search, URL fetch, code execution, MCP servers: the network the controller must not
  have), and, where the API has one, the reasoning-effort setting the scaffold sent before
  the model could act (its fields are returned as the call's `effort` signature);
- where the usage is in an answer (`UsageReader`: a JSON body or an SSE stream, parsed as it
  passes), and what marks an error inside a stream that began well;
- a minimal request of the harness's own (`probe`), to ask the provider whether it works when
  the relay's record says it may not.

Which fields and headers of an accepted call reach the provider, and how big its answer may
be, is `relay_policy.py`'s.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from typing import Any

KINDS = ("openai", "anthropic", "google", "openai-compatible")


@dataclass(frozen=True)
class Credential:
    """The header that carries the key, and what comes before the key in it."""

    header: str
    prefix: str = ""


CREDENTIALS = {
    "openai": Credential("Authorization", "Bearer "),
    "openai-compatible": Credential("Authorization", "Bearer "),
    "anthropic": Credential("x-api-key"),
    "google": Credential("x-goog-api-key"),
}
# Headers that carry a credential, or pick the account a key bills (an organisation, a
# project), in one API or another: never passed on from the controller.
CREDENTIAL_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "x-goog-api-key",
        "api-key",
        "cookie",
        "openai-organization",
        "openai-project",
        "x-goog-user-project",
    }
)
# Model calls, relative to the base URL, all POST ({model}: the run's model).
ENDPOINTS = {
    "openai-compatible": ("chat/completions",),
    "openai": ("responses", "chat/completions"),
    "anthropic": ("messages",),
    "google": ("models/{model}:streamGenerateContent", "models/{model}:generateContent"),
}
QUERY = {"google": frozenset({"alt"})}  # passed on; any other query parameter is dropped
# Where a request sets the reasoning effort: pinned to what the scaffold sent first.
EFFORT_FIELDS: dict[str, tuple[tuple[str, ...], ...]] = {
    "openai-compatible": (("reasoning_effort",), ("reasoning",)),
    "openai": (("reasoning",), ("reasoning_effort",)),
    "anthropic": (("thinking",), ("output_config",)),
    "google": (("generationConfig", "thinkingConfig"),),
}
# Fields that make the provider reach out, run code, or pick another model for the caller.
REFUSED_FIELDS = {
    "openai-compatible": ("plugins", "web_search_options", "models"),
    "openai": ("web_search_options", "background"),
    "anthropic": ("mcp_servers", "container"),
    "google": (),
}
CLIENT_TOOL_TYPES = frozenset({"function", "custom"})  # run by the caller (the scaffold)
GOOGLE_TOOL_KEYS = frozenset({"functionDeclarations", "function_declarations"})
# Answers that say the provider (or the operator's account with it) failed, not the request.
FAILURE_STATUSES = frozenset({401, 402, 403, 404, 408, 429})
PROBE_TEXT = "Reply with the word OK."


def is_failure(status: int) -> bool:
    """An HTTP status that counts as the provider failing (5xx, rate limit, key or account)."""
    return status >= 500 or status in FAILURE_STATUSES


class Refused(ValueError):
    """A call the relay does not pass on; the message says why (it goes back to the caller,
    with HTTP `status`: 403 for what is not allowed, 400 for a body that does not parse)."""

    def __init__(self, message: str, status: int = 403) -> None:
        super().__init__(message)
        self.status = status


def endpoint_paths(kind: str, model: str) -> tuple[str, ...]:
    return tuple(p.format(model=model) for p in ENDPOINTS[kind])


def _path(body: dict[str, Any], keys: tuple[str, ...]) -> object:
    value: object = body
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _check_tools(kind: str, tools: object) -> None:
    if tools is None:
        return
    if not isinstance(tools, list):
        raise Refused("'tools' must be a list")
    for tool in tools:
        if not isinstance(tool, dict):
            raise Refused("each tool must be an object")
        if kind == "google":
            extra = set(tool) - GOOGLE_TOOL_KEYS
            if extra:
                raise Refused(f"provider-side tools are not allowed ({', '.join(sorted(extra))})")
        elif kind == "anthropic":
            if tool.get("type") not in (None, "custom"):
                raise Refused(f"provider-side tools are not allowed ({tool.get('type')})")
        elif tool.get("type") not in CLIENT_TOOL_TYPES:
            raise Refused(f"provider-side tools are not allowed ({tool.get('type')})")


def check_path(kind: str, model: str, path: str) -> None:
    """`Refused` unless `path` (relative to the base URL) is a model call of the run's model."""
    if path not in endpoint_paths(kind, model):
        if kind == "google" and path.startswith("models/"):
            raise Refused(f"only model '{model}' may be called")
        raise Refused(f"'{path}' is not a model call of this provider")


def check_call(kind: str, model: str, parsed: dict[str, Any]) -> str:
    """Check one model call's parsed body (its path passed `check_path`); return its effort
    signature (a canonical text of its reasoning-effort fields). `Refused` says why not."""
    if kind != "google" and parsed.get("model") != model:
        raise Refused(f"only model '{model}' may be called (got {str(parsed.get('model'))[:80]!r})")
    for name in REFUSED_FIELDS[kind]:
        if name in parsed:
            raise Refused(f"'{name}' is not allowed")
    _check_tools(kind, parsed.get("tools"))
    effort = [_path(parsed, keys) for keys in EFFORT_FIELDS[kind]]
    return json.dumps(effort, sort_keys=True, separators=(",", ":"))


def probe(kind: str, model: str) -> tuple[str, dict[str, object], dict[str, str]]:
    """The harness's own minimal call: (path relative to the base URL, body, extra headers)."""
    user = [{"role": "user", "content": PROBE_TEXT}]
    if kind == "openai":
        return "responses", {"model": model, "input": PROBE_TEXT, "max_output_tokens": 16}, {}
    if kind == "anthropic":
        body: dict[str, object] = {"model": model, "max_tokens": 1, "messages": user}
        return "messages", body, {"anthropic-version": "2023-06-01"}
    if kind == "google":
        contents = [{"role": "user", "parts": [{"text": PROBE_TEXT}]}]
        body = {"contents": contents, "generationConfig": {"maxOutputTokens": 1}}
        return f"models/{model}:generateContent", body, {}
    return "chat/completions", {"model": model, "messages": user, "max_tokens": 16}, {}


@dataclass
class Tokens:
    """Token counts in the parts of `toolkit.results.model.Usage` (which do not overlap)."""

    input: int = 0
    output: int = 0
    reasoning: int = 0
    cache_read: int = 0
    cache_write: int = 0

    def add(self, other: Tokens) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return max(0, int(value))


def _detail(usage: dict[str, Any], key: str, inner: str) -> int:
    value = usage.get(key)
    return _int(value.get(inner)) if isinstance(value, dict) else 0


def normalise(usage: dict[str, Any]) -> Tokens:
    """One answer's usage, whichever API's shape it has, as non-overlapping parts."""
    if "promptTokenCount" in usage or "candidatesTokenCount" in usage:  # Google
        cached = _int(usage.get("cachedContentTokenCount"))
        return Tokens(
            input=max(0, _int(usage.get("promptTokenCount")) - cached),
            output=_int(usage.get("candidatesTokenCount")),
            reasoning=_int(usage.get("thoughtsTokenCount")),
            cache_read=cached,
        )
    if "prompt_tokens" in usage or "completion_tokens" in usage:  # chat completions
        cached = _detail(usage, "prompt_tokens_details", "cached_tokens")
        reasoning = _detail(usage, "completion_tokens_details", "reasoning_tokens")
        return Tokens(
            input=max(0, _int(usage.get("prompt_tokens")) - cached),
            output=max(0, _int(usage.get("completion_tokens")) - reasoning),
            reasoning=reasoning,
            cache_read=cached,
        )
    if "cache_read_input_tokens" in usage or "cache_creation_input_tokens" in usage:  # Anthropic
        return Tokens(
            input=_int(usage.get("input_tokens")),
            output=_int(usage.get("output_tokens")),
            cache_read=_int(usage.get("cache_read_input_tokens")),
            cache_write=_int(usage.get("cache_creation_input_tokens")),
        )
    cached = _detail(usage, "input_tokens_details", "cached_tokens")  # OpenAI responses
    reasoning = _detail(usage, "output_tokens_details", "reasoning_tokens")
    return Tokens(
        input=max(0, _int(usage.get("input_tokens")) - cached),
        output=max(0, _int(usage.get("output_tokens")) - reasoning),
        reasoning=reasoning,
        cache_read=cached,
    )


def _usages(obj: object) -> list[dict[str, Any]]:
    """The usage objects one JSON message carries, wherever the API puts them."""
    if not isinstance(obj, dict):
        return []
    found = []
    for holder in (obj, obj.get("response"), obj.get("message")):
        if isinstance(holder, dict) and isinstance(holder.get("usage"), dict):
            found.append(holder["usage"])
    if isinstance(obj.get("usageMetadata"), dict):
        found.append(obj["usageMetadata"])
    return found


def _error_in(obj: object) -> str | None:
    """An error reported inside an answer that began with 200 (a stream cut short by an
    overloaded provider, say)."""
    if not isinstance(obj, dict):
        return None
    kind = obj.get("type")
    if kind in ("error", "response.failed") or (obj.get("error") and "choices" not in obj):
        error = obj.get("error") or (obj.get("response") or {}).get("error") or kind
        text = json.dumps(error)[:200] if not isinstance(error, str) else error[:200]
        return f"error inside the answer: {text}"
    return None


MAX_JSON_BYTES = 16 * 2**20  # a plain JSON answer bigger than this is not parsed for usage
MAX_SSE_LINE = 4 * 2**20


class UsageReader:
    """Reads one answer as it passes (`feed`), for its usage and any error inside it.

    Fields of usage objects seen later in a stream replace earlier ones (Anthropic and Google
    repeat cumulative counts); `tokens()` is None when the answer had no usage."""

    def __init__(self, content_type: str) -> None:
        ctype = content_type.split(";", 1)[0].strip().lower()
        self.sse = ctype == "text/event-stream"
        self.json = ctype.endswith("json")
        self._buffer = b""
        self._data: list[bytes] = []
        self._event = ""
        self._merged: dict[str, Any] = {}
        self._too_big = False
        self.error: str | None = None

    def feed(self, chunk: bytes) -> None:
        if self._too_big or not (self.sse or self.json):
            return
        self._buffer += chunk
        if self.json:
            if len(self._buffer) > MAX_JSON_BYTES:
                self._too_big, self._buffer = True, b""
            return
        while b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            self._line(line.rstrip(b"\r"))
        if len(self._buffer) > MAX_SSE_LINE:
            self._too_big, self._buffer = True, b""

    def _line(self, line: bytes) -> None:
        if not line:  # the end of one event
            if self._data:
                self._message(b"\n".join(self._data))
            self._data, self._event = [], ""
        elif line.startswith(b"data:"):
            self._data.append(line[5:].strip())
        elif line.startswith(b"event:"):
            self._event = line[6:].strip().decode(errors="replace")
            if self._event == "error":
                self.error = self.error or "error event inside the answer"

    def _message(self, data: bytes) -> None:
        if data == b"[DONE]":
            return
        try:
            obj = json.loads(data)
        except ValueError:
            return
        for usage in _usages(obj):
            self._merged.update({k: v for k, v in usage.items() if v is not None})
        self.error = self.error or _error_in(obj)

    def finish(self) -> None:
        """The answer is complete: parse what is left."""
        if self.json and not self._too_big and self._buffer:
            try:
                obj = json.loads(self._buffer)
            except ValueError:
                obj = None
            for item in obj if isinstance(obj, list) else [obj]:
                for usage in _usages(item):
                    self._merged.update(usage)
        elif self.sse:
            self._line(self._buffer.rstrip(b"\r"))
            self._line(b"")
        self._buffer = b""

    def tokens(self) -> Tokens | None:
        return normalise(self._merged) if self._merged else None

    def cost(self) -> float | None:
        """The cost the provider reported with the usage (USD), where it reports one."""
        value = self._merged.get("cost")
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return float(value) if 0 <= value < float("inf") else None
