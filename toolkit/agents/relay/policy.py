"""What of a model call the relay passes on: the body re-built from an allow-list, the
headers from another, the output per call capped, one answer per call.

A call that `provider_api.check_call` accepted (the run's model, no provider-side tools, the
scaffold's effort) could still ask the provider for more than the run is meant to have: many
answers at once (`n`, `candidateCount`), a huge answer (`max_tokens`), a pricier service tier,
a beta feature behind a header, or fields the provider may learn later. So the relay never
forwards the bytes it got:

- the body is parsed strictly (`parse_body`: UTF-8 JSON, one object, no duplicate key at any
  depth, no NaN or infinity) and re-serialized from the parsed object; a body that does not
  parse is refused (400), so what the provider reads is what the relay checked;
- per API (`FIELDS`), only the listed top-level fields pass (Google's `generationConfig` and
  the chat API's `stream_options` have lists of their own); any other field is dropped and
  named in the call's `provider.jsonl` line. Fields that make the provider reach out or act
  (`provider_api.REFUSED_FIELDS`) are refused with a reason instead, as before;
- the answer count is pinned to 1 (`n`, `candidateCount`: set to 1 where sent);
- the output per call is capped by the track (`max_output_tokens`): each field that bounds it
  (`max_tokens`, `max_completion_tokens`, `max_output_tokens`, `maxOutputTokens`) is lowered
  to the cap, and the API's own field is set to the cap where the call sent none; a value
  that is not a positive whole number is refused (400). Anthropic's `max_tokens` also holds
  the thinking budget, which the effort pin keeps the scaffold's: it comes on top of the cap;
- a streamed chat call always asks for the usage (`stream_options.include_usage`), which the
  budget counts;
- content the provider would fetch from elsewhere (`check_content`: an image or document by
  URL, a file stored with the provider or by URI) is refused: inline content only;
- headers are built anew (`upstream_headers`): the relay's own content type, host, length and
  credential, and from the caller only `Accept` (a JSON or event-stream type), Anthropic's
  `anthropic-version` (a date) and the `anthropic-beta` features in `ANTHROPIC_BETAS`.

Google's API also reads snake_case names (`generation_config`): only the camelCase ones the
scaffold's client sends are listed, so an alias cannot slip past the pin or the cap.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from toolkit.agents.provider_api import Refused

_CHAT = frozenset(
    {
        "model",
        "messages",
        "stream",
        "stream_options",
        "max_tokens",
        "max_completion_tokens",
        "temperature",
        "top_p",
        "frequency_penalty",
        "presence_penalty",
        "stop",
        "seed",
        "response_format",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "reasoning_effort",
        "user",
        "logit_bias",
        "logprobs",
        "top_logprobs",
        "n",
        "verbosity",
        "prompt_cache_key",
        "safety_identifier",
        "store",
        "metadata",
    }
)
# What OpenAI-compatible servers add to the chat API (sampling, an effort object).
_COMPATIBLE = _CHAT | {"reasoning", "top_k", "min_p", "repetition_penalty"}
_RESPONSES = frozenset(
    {
        "model",
        "input",
        "instructions",
        "stream",
        "max_output_tokens",
        "temperature",
        "top_p",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "reasoning",
        "text",
        "store",
        "include",
        "metadata",
        "user",
        "prompt_cache_key",
        "safety_identifier",
        "truncation",
        "top_logprobs",
        "max_tool_calls",
    }
)
_ANTHROPIC = frozenset(
    {
        "model",
        "messages",
        "system",
        "max_tokens",
        "stream",
        "temperature",
        "top_p",
        "top_k",
        "stop_sequences",
        "tools",
        "tool_choice",
        "thinking",
        "output_config",
        "metadata",
    }
)
_GOOGLE = frozenset(
    {"contents", "systemInstruction", "tools", "toolConfig", "generationConfig", "safetySettings"}
)
_GOOGLE_GENERATION = frozenset(
    {
        "temperature",
        "topP",
        "topK",
        "candidateCount",
        "maxOutputTokens",
        "stopSequences",
        "responseMimeType",
        "responseSchema",
        "responseJsonSchema",
        "presencePenalty",
        "frequencyPenalty",
        "seed",
        "thinkingConfig",
        "responseLogprobs",
        "logprobs",
        "mediaResolution",
    }
)
_STREAM_OPTIONS = frozenset({"include_usage"})


@dataclass(frozen=True)
class Api:
    """One call endpoint's rules: the fields that pass, where the output cap and the answer
    count live, and the field set to the cap when a call sends none."""

    fields: frozenset[str]
    caps: tuple[tuple[str, ...], ...]
    default_cap: tuple[str, ...]
    counts: tuple[tuple[str, ...], ...] = ()
    nested: Mapping[str, frozenset[str]] = field(default_factory=dict)
    usage_in_stream: bool = False


_CHAT_CAPS = (("max_tokens",), ("max_completion_tokens",))
FIELDS: dict[tuple[str, str], Api] = {
    ("openai", "chat"): Api(
        _CHAT,
        _CHAT_CAPS,
        ("max_completion_tokens",),
        (("n",),),
        {"stream_options": _STREAM_OPTIONS},
        usage_in_stream=True,
    ),
    ("openai-compatible", "chat"): Api(
        _COMPATIBLE,
        _CHAT_CAPS,
        ("max_tokens",),
        (("n",),),
        {"stream_options": _STREAM_OPTIONS},
        usage_in_stream=True,
    ),
    ("openai", "responses"): Api(_RESPONSES, (("max_output_tokens",),), ("max_output_tokens",)),
    ("anthropic", "messages"): Api(_ANTHROPIC, (("max_tokens",),), ("max_tokens",)),
    ("google", "generate"): Api(
        _GOOGLE,
        (("generationConfig", "maxOutputTokens"),),
        ("generationConfig", "maxOutputTokens"),
        (("generationConfig", "candidateCount"),),
        {"generationConfig": _GOOGLE_GENERATION},
    ),
}
ANTHROPIC_BETAS = frozenset(
    {
        "interleaved-thinking-2025-05-14",  # the scaffold's own (thinking between tool calls)
        "fine-grained-tool-streaming-2025-05-14",  # the scaffold's own
        "structured-outputs-2025-11-13",  # the client's, for a JSON answer format
    }
)
ANTHROPIC_VERSION = "2023-06-01"
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
ACCEPTED_TYPES = frozenset({"application/json", "text/event-stream", "*/*"})
MAX_NOTES = 20


def api_of(kind: str, path: str) -> Api:
    """The rules of one call endpoint (`path` relative to the base URL, already checked)."""
    if kind == "google":
        return FIELDS[("google", "generate")]
    if kind == "anthropic":
        return FIELDS[("anthropic", "messages")]
    family = "responses" if path == "responses" else "chat"
    return FIELDS[(kind, family)]


# -- the body ------------------------------------------------------------------------------------


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise Refused(f"the body repeats the key {key[:60]!r}", status=400)
        found[key] = value
    return found


def _constant(name: str) -> Any:
    raise Refused(f"the body holds {name}, which is not JSON", status=400)


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise Refused(f"the body holds a number out of range ({text[:40]})", status=400)
    return value


def parse_body(body: bytes) -> dict[str, Any]:
    """The request body as one JSON object, parsed strictly; `Refused` (400) says why not."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Refused("the body is not UTF-8 text", status=400) from e
    try:
        parsed = json.loads(
            text, object_pairs_hook=_no_duplicates, parse_constant=_constant, parse_float=_finite
        )
    except Refused:
        raise
    except (ValueError, RecursionError) as e:
        raise Refused("the body is not JSON", status=400) from e
    if not isinstance(parsed, dict):
        raise Refused("the body is not a JSON object", status=400)
    return parsed


def serialize(body: dict[str, Any]) -> bytes:
    """The bytes the provider gets: written from the parsed (and cleaned) object."""
    try:
        return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    except UnicodeEncodeError as e:  # a lone surrogate escape (\\ud800): no provider reads it
        raise Refused("the body holds text that is not valid Unicode", status=400) from e


@dataclass
class Cleaned:
    """A call as the provider gets it, and what the relay changed (for `provider.jsonl`)."""

    body: dict[str, Any]
    output_cap: int
    dropped: list[str] = field(default_factory=list)
    pinned: list[str] = field(default_factory=list)
    capped: list[str] = field(default_factory=list)

    def notes(self) -> dict[str, list[str]]:
        found = {"dropped": self.dropped, "pinned": self.pinned, "capped": self.capped}
        return {k: v[:MAX_NOTES] for k, v in found.items() if v}


def _name(keys: tuple[str, ...]) -> str:
    return ".".join(keys)


def _holder(body: dict[str, Any], keys: tuple[str, ...], create: bool) -> dict[str, Any] | None:
    """The object holding the last key of `keys` (created where asked and missing)."""
    holder: Any = body
    for key in keys[:-1]:
        if not isinstance(holder, dict):
            return None
        if key not in holder and create:
            holder[key] = {}
        holder = holder.get(key)
    return holder if isinstance(holder, dict) else None


# Where a call carries its conversation (and so content parts a provider may fetch).
CONTENT_FIELDS = ("messages", "input", "system", "contents", "systemInstruction")


def _remote(part: dict[str, Any]) -> str | None:
    """What of the outside world a content part makes the provider fetch, if anything."""
    kind = part.get("type")
    if "fileData" in part or "file_data" in part:
        return "a file by URI (fileData)"
    if kind in ("image_url", "input_image"):
        url = part.get("image_url")
        url = url.get("url") if isinstance(url, dict) else url
        if isinstance(url, str) and not url.startswith("data:"):
            return f"an image by URL ({kind})"
    if kind in ("input_image", "input_file", "file"):
        inner = part.get("file")
        inner = inner if isinstance(inner, dict) else {}
        if any(k in d for d in (part, inner) for k in ("file_id", "file_url")):
            return f"a stored or remote file ({kind})"
    if kind in ("image", "document", "container_upload"):
        source = part.get("source")
        if kind == "container_upload" or (
            isinstance(source, dict) and source.get("type") in ("url", "file")
        ):
            return f"a stored or remote {kind}"
    return None


def check_content(body: dict[str, Any]) -> None:
    """`Refused` for content the provider would fetch from elsewhere (an image or document by
    URL, a file stored with the provider): the web, or another run's files, through the key.
    Images and files inline (base64) pass."""
    stack: list[Any] = [body[k] for k in CONTENT_FIELDS if k in body]
    while stack:  # no recursion: a body may be nested as deep as the parser allowed
        value = stack.pop()
        if isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, dict):
            why = _remote(value)
            if why is not None:
                raise Refused(f"content the provider would fetch is not allowed: {why}")
            stack.extend(value.values())


def _thinking_budget(kind: str, body: dict[str, Any]) -> int:
    """Anthropic counts the thinking budget in `max_tokens` (the scaffold adds it on top of its
    answer's limit): the budget, which the effort pin keeps the scaffold's, comes on top of the
    cap."""
    thinking = body.get("thinking") if kind == "anthropic" else None
    if not isinstance(thinking, dict) or thinking.get("type") != "enabled":
        return 0
    budget = thinking.get("budget_tokens")
    return budget if isinstance(budget, int) and not isinstance(budget, bool) and budget > 0 else 0


def clean(kind: str, path: str, body: dict[str, Any], max_output_tokens: int) -> Cleaned:
    """The call's body reduced to what its API's allow-list passes, the answer count pinned to
    one and the output capped at `max_output_tokens`; `Refused` for a bad limit."""
    api = api_of(kind, path)
    check_content(body)
    max_output_tokens += _thinking_budget(kind, body)
    out = Cleaned(body={}, output_cap=max_output_tokens)
    for key, value in body.items():
        if key not in api.fields:
            out.dropped.append(key[:60])
            continue
        allowed = api.nested.get(key)
        if allowed is not None and isinstance(value, dict):
            kept = {k: v for k, v in value.items() if k in allowed}
            out.dropped += [f"{key}.{k[:60]}" for k in value if k not in allowed]
            value = kept
        out.body[key] = value
    for keys in api.counts:
        holder = _holder(out.body, keys, create=False)
        if holder is not None and keys[-1] in holder and holder[keys[-1]] != 1:
            holder[keys[-1]] = 1
            out.pinned.append(_name(keys))
    seen = False
    for keys in api.caps:
        holder = _holder(out.body, keys, create=False)
        if holder is None or keys[-1] not in holder:
            continue
        value = holder[keys[-1]]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise Refused(f"'{_name(keys)}' must be a positive whole number", status=400)
        seen = True
        if value > max_output_tokens:
            holder[keys[-1]] = max_output_tokens
            out.capped.append(_name(keys))
    if not seen:
        holder = _holder(out.body, api.default_cap, create=True)
        if holder is None:
            raise Refused(f"'{api.default_cap[0]}' must be an object", status=400)
        holder[api.default_cap[-1]] = max_output_tokens
        out.capped.append(_name(api.default_cap))
    if api.usage_in_stream and out.body.get("stream") is True:
        out.body["stream_options"] = {"include_usage": True}
    return out


# -- the headers ---------------------------------------------------------------------------------


def upstream_headers(
    kind: str, incoming: Mapping[str, str] | Any, dropped: list[str]
) -> dict[str, str]:
    """The headers the caller may choose, from `incoming` by the allow-list; the names (and
    Anthropic beta features) left out are added to `dropped`. The relay adds the rest."""
    headers: dict[str, str] = {}
    seen: set[str] = set()
    for name, value in incoming.items():
        low = name.lower()
        if low in seen:
            continue  # the first of a repeated header, nothing else
        seen.add(low)
        if low == "accept" and value.split(";")[0].strip().lower() in ACCEPTED_TYPES:
            headers["Accept"] = value.split(";")[0].strip().lower()
        elif kind == "anthropic" and low == "anthropic-version" and _DATE.fullmatch(value):
            headers["anthropic-version"] = value
        elif kind == "anthropic" and low == "anthropic-beta":
            asked = [b.strip() for b in value.split(",") if b.strip()]
            kept = [b for b in asked if b in ANTHROPIC_BETAS]
            dropped += [f"anthropic-beta:{b[:60]}" for b in asked if b not in ANTHROPIC_BETAS]
            if kept:
                headers["anthropic-beta"] = ",".join(kept)
        elif low not in _RELAY_SETS:
            dropped.append(f"header:{low[:60]}")
    if kind == "anthropic":
        headers.setdefault("anthropic-version", ANTHROPIC_VERSION)
    return headers


# Headers of the transport, or that the relay sets itself: not worth a note when dropped.
_RELAY_SETS = frozenset(
    {
        "host",
        "content-length",
        "content-type",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "accept-encoding",
        "user-agent",
        "authorization",
        "x-api-key",
        "x-goog-api-key",
    }
)


# -- the relay's own answers ---------------------------------------------------------------------

_GOOGLE_STATUS = {
    400: "INVALID_ARGUMENT",
    403: "PERMISSION_DENIED",
    405: "UNIMPLEMENTED",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
}


def error_body(kind: str, status: int, message: str, code: str = "ari_relay") -> bytes:
    """An error answer in the provider's own shape, so that the scaffold's client reads its
    message and shows it to the model: `error.message` in each."""
    error: dict[str, object]
    if kind == "anthropic":
        error = {"type": "error", "error": {"type": code, "message": message}}
    elif kind == "google":
        state = "FAILED_PRECONDITION" if code != "ari_relay" else _GOOGLE_STATUS.get(status, "")
        error = {"error": {"code": status, "message": message, "status": state or "UNKNOWN"}}
    else:
        error = {"error": {"message": message, "type": code, "param": None, "code": code}}
    return json.dumps(error).encode()
