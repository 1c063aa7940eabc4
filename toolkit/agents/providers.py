"""Model providers an operator can name (`providers.toml`): kind, base URL, key variable, prices.

The file is data, not code: which API a provider speaks, where it lives, which environment
variable holds its key (never the key itself) and which header carries the key (`key_header`,
`key_prefix`: the kind's own by default). `toolkit/agents/providers.toml` ships the common
ones; an operator passes another with `--providers FILE` or `ARI_PROVIDERS`. The key stays in
the harness: its relay (`relay/`) sets that header on each call it passes to the base URL.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from toolkit.agents.provider_api import CREDENTIALS, Credential
from toolkit.sandbox import Egress

DEFAULT_FILE = Path(__file__).with_name("providers.toml")
KINDS = ("openai", "anthropic", "google", "openai-compatible")
# The scaffold's client package per kind, and the public endpoint of the native ones.
NPM = {
    "openai": "@ai-sdk/openai",
    "anthropic": "@ai-sdk/anthropic",
    "google": "@ai-sdk/google",
    "openai-compatible": "@ai-sdk/openai-compatible",
}
NATIVE_URLS = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com/v1",
    "google": "https://generativelanguage.googleapis.com/v1beta",
}
COST_KEYS = ("input", "output", "cache_read", "cache_write")
_TOKEN = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+")


class ProviderError(ValueError):
    """A providers file or entry an operator must fix; the message says what, where, and how."""


@dataclass(frozen=True)
class Provider:
    """One provider entry."""

    name: str
    kind: str
    base_url: str
    key_env: str
    cost: dict[str, float] = field(default_factory=dict)
    """USD per million tokens by part (input, output, cache_read, cache_write); {} = unknown."""
    context: int | None = None
    output: int | None = None
    key_header: str | None = None
    """The header that carries the key (None: the kind's own, e.g. `Authorization`)."""
    key_prefix: str | None = None
    """What comes before the key in that header (None: the kind's own, e.g. `Bearer `)."""
    reports_cost: bool = False
    """The provider reports each call's cost in USD with its usage (OpenRouter does)."""

    @property
    def priced(self) -> bool:
        """Whether the relay can count this provider's calls in dollars (a cost cap holds):
        input and output prices in the providers file, or a cost the provider reports."""
        return {"input", "output"} <= set(self.cost) or self.reports_cost

    @property
    def credential(self) -> Credential:
        """How the relay sends the key to this provider."""
        default = CREDENTIALS[self.kind]
        if self.key_header is None:
            return default
        return Credential(self.key_header, self.key_prefix or "")

    @property
    def native(self) -> bool:
        return self.kind != "openai-compatible"

    @property
    def egress(self) -> Egress:
        """The base URL's host and port: where the harness's relay connects (the controller
        itself reaches only the relay)."""
        parts = urlsplit(self.base_url)
        assert parts.hostname is not None  # checked when loaded
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return Egress(parts.hostname, port)


def providers_file(explicit: Path | None = None) -> Path:
    """`explicit`, else $ARI_PROVIDERS, else the file that ships with the toolkit."""
    if explicit is not None:
        return explicit
    env = os.environ.get("ARI_PROVIDERS")
    return Path(env) if env else DEFAULT_FILE


def load_providers(path: Path) -> dict[str, Provider]:
    """Every entry of a providers file, checked; `ProviderError` naming the file and entry."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ProviderError(f"{path}: cannot read the providers file: {e.strerror}") from e
    except tomllib.TOMLDecodeError as e:
        raise ProviderError(f"{path}: not valid TOML: {e}") from e
    found: dict[str, Provider] = {}
    for name, entry in raw.items():
        if not isinstance(entry, dict):
            raise ProviderError(f"{path}: '{name}' must be a table ([{name}])")
        found[name] = _provider(path, name, entry)
    return found


def _provider(path: Path, name: str, entry: dict[str, object]) -> Provider:
    where = f"{path}: provider '{name}'"
    known = {"kind", "base_url", "key_env", "cost", "context", "output", "key_header", "key_prefix"}
    known.add("reports_cost")
    unknown = set(entry) - known
    if unknown:
        raise ProviderError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    kind = entry.get("kind")
    if kind not in KINDS:
        raise ProviderError(f"{where}: kind must be one of {', '.join(KINDS)} (got {kind!r})")
    base_url = entry.get("base_url", NATIVE_URLS.get(str(kind)))
    if not isinstance(base_url, str):
        raise ProviderError(f"{where}: base_url is required for kind '{kind}'")
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ProviderError(f"{where}: base_url {base_url!r} must be an http(s) URL with a host")
    key_env = entry.get("key_env")
    if not isinstance(key_env, str) or not key_env.isidentifier():
        raise ProviderError(f"{where}: key_env must name an environment variable")
    cost = entry.get("cost", {})
    if not isinstance(cost, dict) or set(cost) - set(COST_KEYS):
        raise ProviderError(f"{where}: cost takes {', '.join(COST_KEYS)} (USD per million)")
    if not all(isinstance(v, int | float) and v >= 0 for v in cost.values()):
        raise ProviderError(f"{where}: cost values must be non-negative numbers")
    header, prefix = entry.get("key_header"), entry.get("key_prefix")
    if header is not None and (not isinstance(header, str) or not _TOKEN.fullmatch(header)):
        raise ProviderError(f"{where}: key_header must be an HTTP header name")
    if prefix is not None and (not isinstance(prefix, str) or not prefix.isprintable()):
        raise ProviderError(f'{where}: key_prefix must be printable text (e.g. "Bearer ")')
    if prefix is not None and header is None:
        raise ProviderError(f"{where}: key_prefix needs key_header")
    reports_cost = entry.get("reports_cost", False)
    if not isinstance(reports_cost, bool):
        raise ProviderError(f"{where}: reports_cost must be true or false")
    limits = {k: entry.get(k) for k in ("context", "output")}
    for key, value in limits.items():
        if value is not None and (not isinstance(value, int) or value <= 0):
            raise ProviderError(f"{where}: {key} must be a positive number of tokens")
    return Provider(
        name=name,
        kind=str(kind),
        base_url=base_url.rstrip("/"),
        key_env=key_env,
        cost={k: float(v) for k, v in cost.items()},
        context=limits["context"],  # type: ignore[arg-type]
        output=limits["output"],  # type: ignore[arg-type]
        key_header=header,
        key_prefix=prefix,
        reports_cost=reports_cost,
    )


def get_provider(name: str, path: Path | None = None) -> Provider:
    """The entry `name` of the providers file in force; `ProviderError` listing the known."""
    file = providers_file(path)
    providers = load_providers(file)
    if name not in providers:
        known = ", ".join(sorted(providers)) or "none"
        raise ProviderError(f"{file}: no provider '{name}' (known: {known}); add it there")
    return providers[name]


def override(
    name: str, path: Path | None = None, *, base_url: str | None, key_env: str | None
) -> Provider:
    """The entry `name`, with `base_url` / `key_env` replacing its own where given; a name
    the file lacks is an OpenAI-compatible provider when both are given."""
    file = providers_file(path)
    providers = load_providers(file)
    entry: dict[str, object]
    if name in providers:
        known = providers[name]
        entry = {"kind": known.kind, "base_url": known.base_url, "key_env": known.key_env}
        entry.update({"cost": known.cost} if known.cost else {})
        entry.update({k: v for k, v in (("context", known.context), ("output", known.output)) if v})
        extra = (("key_header", known.key_header), ("key_prefix", known.key_prefix))
        entry.update({k: v for k, v in extra if v is not None})
    elif base_url is None or key_env is None:
        return get_provider(name, path)  # the error that lists the known names
    else:
        entry = {"kind": "openai-compatible"}
    entry.update({k: v for k, v in (("base_url", base_url), ("key_env", key_env)) if v})
    return _provider(file, name, entry)


def cost_cap_check(entry: object, asked: float | None, what: str = "--max-cost-usd") -> str | None:
    """Why a cost cap the operator asked for (`what` `asked`) cannot hold for this provider,
    in one line with the fix; None when it can, or when none was asked (the track's own cap:
    `cost_cap_note`). `entry` is the agent's provider entry (None: an agent that calls no
    model). The relay counts dollars only with prices or a reported cost (`Provider.priced`):
    without them the cap would be silently ignored, so it is refused before the clock."""
    if not isinstance(entry, Provider) or entry.priced or asked is None:
        return None
    return (
        f"{what} {asked:g}: provider '{entry.name}' has no prices, so the relay cannot count "
        f"dollars and the cap would not hold; add [{entry.name}.cost] input and output (USD "
        "per million tokens) to your providers file (--providers FILE), or cap tokens with "
        "--max-tokens-total"
    )


def cost_cap_note(entry: object, track_cap: float | None) -> str | None:
    """The warning when the track's own cost cap cannot hold for this provider (no prices)."""
    if not isinstance(entry, Provider) or entry.priced or track_cap is None:
        return None
    return (
        f"the track's cost cap (${track_cap:g}) cannot hold for provider '{entry.name}' (no "
        f"prices): only the token cap does; add [{entry.name}.cost] to your providers file"
    )
