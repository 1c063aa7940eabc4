"""The `opencode` agent: a real model drives the run through the opencode scaffold, headless.

One scaffold for every row (the protocol): the same prompt, tools and configuration; only the
model and its reasoning effort differ. Per run the adapter writes, into a fresh folder only the
controller sees (HOME and the XDG folders):

- one provider (from `providers.toml`: kind, base URL, the variable holding its key) with the
  model, and the effort as that model's option: `reasoningEffort` for OpenAI-compatible servers
  (sent as `reasoning_effort`, checked against a scripted provider), the scaffold's own variant
  of that name for native clients (OpenAI, Anthropic, Google), refused if it has none;
- permissions: shell, read, edit, write, glob and grep allowed; everything else (web fetch,
  web search, sub-agents, skills, questions, paths outside the workspace) denied;
- everything that would reach the network or load outside code switched off: the model
  catalogue fetch, auto-update, sharing, default and external plug-ins, LSP and formatter
  downloads, external skills and Claude-Code files; the start-up dependency install is
  prevented by creating its folder already installed (`node_modules` plus a lock that lists
  the package it would add). Each switch was checked by watching the connections it makes.

It runs `opencode run --format json` at the workspace root with the task prompt. stdout (JSON
events) goes to `events.jsonl`, stderr (its log) to `scaffold.log`; at the end `opencode
export` gives `transcript.json`.

The key never enters the controller. The scaffold's shell runs the model's commands as the
scaffold's own user, so whatever the scaffold can read (its environment, its files) and write
(its own output, through /proc) belongs to the model. So the harness starts a provider relay
on the host for the run (`relay/`): the scaffold's provider `baseURL` points at it, with a
placeholder key; the controller's egress allow-list holds the relay's address and port and
nothing else; the relay sets the real key on each model call it passes on, logs every call to
`provider.jsonl`, and reads the provider's own usage counts. Whether the provider failed (the
run is then `invalid`: rerun) is decided from the relay's record and a probe call of the
harness's own, never from the scaffold's events: an `error` event is shown in the reason,
nothing more. Usage: the relay's counts when the provider reported any (`source: provider`),
else the sum over the scaffold's `step_finish` events (`source: scaffold`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from toolkit.agents.base import Agent, AgentContext, AgentOutcome
from toolkit.agents.opencode_events import EventTally
from toolkit.agents.providers import NPM, Provider, ProviderError, override
from toolkit.agents.relay.accounting import LOG_FILE as PROVIDER_LOG
from toolkit.agents.relay.budget import RelayLimits, price
from toolkit.agents.relay.endpoint import LOCAL, RelayEndpoint, RelayPlacementError, relay_endpoint
from toolkit.agents.relay.front import ProviderRelay
from toolkit.agents.scaffold import OPENCODE_VERSION, ScaffoldError, isolated_env, require
from toolkit.results.model import Usage
from toolkit.sandbox import Egress, Sandbox

PLACEHOLDER_KEY = "ari-relay-sets-the-key"  # all the controller has; the relay sets the real one
PREFLIGHT_TIMEOUT_S = 30.0  # the pre-flight call's connect and each read
PREFLIGHT_CHARS = 200
STALL_SHARE = 0.1  # provider failures for longer than this share of the budget: checked, invalid
EXPORT_TIMEOUT_S = 120
EXPORT_CAP_BYTES = 64 * 2**20
"""The largest session export kept as transcript.json (one JSON document: cut, it is useless)."""
EVENTS_FILE, LOG_FILE, TRANSCRIPT_JSON = "events.jsonl", "scaffold.log", "transcript.json"
TITLE = "ARI Bench run"
PROMPT = (
    "You are the agent of an ARI Bench run. Your task is described in TASK.md, in the current "
    "directory: read it first, then carry it out. You work alone: nobody will answer questions "
    "or confirm anything, so decide for yourself and keep going until the task is done or the "
    "budget is used up. All computing goes through the `runner` command that TASK.md explains."
)
ALLOWED_TOOLS = ("bash", "read", "edit", "write", "glob", "grep")
# Off: everything that would reach the network or load code from outside the binary.
SWITCHES = {
    "OPENCODE_DISABLE_MODELS_FETCH": "1",  # models.dev (the bundled catalogue is used)
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1",
    "OPENCODE_DISABLE_CLAUDE_CODE": "1",  # no ~/.claude prompts or skills
    "OPENCODE_DISABLE_PROJECT_CONFIG": "1",  # the workspace cannot reconfigure the scaffold
    "OPENCODE_PURE": "1",  # no external plug-ins
}
# The package the scaffold installs into each config folder at start-up; listing it as
# installed (in package.json, the lock, and an existing node_modules) makes it skip the install.
PLUGIN_PACKAGE = "@opencode-ai/plugin"


class AgentSetupError(RuntimeError):
    """The agent cannot be set up as asked; one line for the operator (what, where, what to do)."""


def _provider_id(provider: Provider) -> str:
    """Native clients keep their own id (the scaffold's catalogue, prices included, is keyed
    by it); other providers get theirs from the providers file."""
    if provider.native:
        return provider.kind
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in provider.name.lower())


def _provider_entry(
    provider: Provider, model: str, options: dict[str, object], base_url: str
) -> dict[str, object]:
    entry: dict[str, object] = {"name": model, "options": options}
    if provider.cost:
        entry["cost"] = dict(provider.cost)
    if provider.context or provider.output:
        limit = {"context": provider.context or 128_000, "output": provider.output or 32_000}
        entry["limit"] = limit
    return {
        "npm": NPM[provider.kind],
        "name": provider.name,
        "options": {"baseURL": base_url, "apiKey": PLACEHOLDER_KEY},
        "models": {model: entry},
    }


def scaffold_config(
    provider: Provider, model: str, options: dict[str, object], base_url: str | None = None
) -> dict[str, object]:
    """The whole opencode configuration of a run (no credential: a placeholder). `base_url`:
    where the scaffold sends its calls (the run's relay); the provider's own by default,
    which is what the configuration hash covers."""
    pid = _provider_id(provider)
    permission: dict[str, str] = {"*": "deny"}
    permission.update({tool: "allow" for tool in ALLOWED_TOOLS})
    return {
        "$schema": "https://opencode.ai/config.json",
        "model": f"{pid}/{model}",
        "small_model": f"{pid}/{model}",
        "enabled_providers": [pid],
        "provider": {pid: _provider_entry(provider, model, options, base_url or provider.base_url)},
        "permission": permission,
        "autoupdate": False,
        "share": "disabled",
        "snapshot": False,  # no git copy of the workspace (and its data) at every step
        "lsp": False,
        "formatter": False,
        "plugin": [],
        "mcp": {},
        "instructions": [],
    }


def native_variants(binary: Path, provider: Provider, model: str) -> dict[str, object]:
    """The reasoning-effort variants the scaffold knows for a native provider's model (asked
    of the binary itself, offline, with a scratch home)."""
    pid = _provider_id(provider)
    config = scaffold_config(provider, model, {})
    with tempfile.TemporaryDirectory(prefix="ari-opencode-") as scratch:
        env = isolated_env(Path(scratch))
        env.update(SWITCHES)
        env["OPENCODE_CONFIG_CONTENT"] = json.dumps(config)
        _prevent_dependency_install(Path(env["XDG_CONFIG_HOME"]) / "opencode")
        try:
            done = subprocess.run(
                [str(binary), "models", pid, "--verbose"],
                capture_output=True,
                text=True,
                timeout=120,
                env=env,
                cwd=scratch,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            raise AgentSetupError(f"{binary}: cannot list the models of '{pid}': {e}") from e
    lines = done.stdout.splitlines()
    key = f"{pid}/{model}"
    if key not in lines:
        raise AgentSetupError(f"opencode does not know model '{model}' of '{pid}': check --model")
    start = lines.index(key) + 1
    end = next((i for i in range(start, len(lines)) if lines[i][:1] not in " {}"), len(lines))
    try:
        entry = json.loads("\n".join(lines[start:end]))
    except ValueError as e:
        raise AgentSetupError(f"cannot read opencode's description of {key}") from e
    variants = entry.get("variants") if isinstance(entry, dict) else None
    return variants if isinstance(variants, dict) else {}


def _prevent_dependency_install(config_dir: Path) -> None:
    """The scaffold installs its plug-in package into every config folder it starts with,
    unless the folder already looks installed: so make it look installed."""
    (config_dir / "node_modules").mkdir(parents=True, exist_ok=True)
    dependencies = {PLUGIN_PACKAGE: OPENCODE_VERSION}
    (config_dir / "package.json").write_text(json.dumps({"dependencies": dependencies}) + "\n")
    lock = {"lockfileVersion": 3, "packages": {"": {"dependencies": dependencies}}}
    (config_dir / "package-lock.json").write_text(json.dumps(lock) + "\n")


def _ripgrep() -> Path:
    found = shutil.which("rg")
    if found is None:
        raise AgentSetupError(
            "ripgrep (rg) is not installed: opencode's grep and glob tools need it, and would "
            "otherwise try to download it; install it (Debian: apt-get install ripgrep)"
        )
    return Path(found).resolve()


def _ripgrep_version(rg: Path) -> str:
    try:
        done = subprocess.run([str(rg), "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return done.stdout.split("\n", 1)[0].strip() or "unknown"


class OpencodeAgent(Agent):
    """The opencode scaffold, configured for one run (see the module docstring)."""

    name = "opencode"

    def __init__(
        self,
        provider: Provider,
        *,
        model: str,
        effort: str | None,
        api_key: str,
        binary: Path,
        version: str,
        ripgrep: Path,
        effort_options: dict[str, object] | None = None,
        stall_share: float = STALL_SHARE,
        relay_options: dict[str, Any] | None = None,
        limits: RelayLimits | None = None,
    ) -> None:
        if not 0 < stall_share <= 1:
            raise ValueError(f"stall_share must be in (0, 1], got {stall_share}")
        self.provider_entry = provider
        self.provider = provider.name
        self.model = model
        self.effort = effort
        self.binary = binary
        self.version = version
        self.ripgrep = ripgrep
        self.stall_share = stall_share
        self.relay_options: dict[str, Any] = dict(relay_options or {})
        """Extra `ProviderRelay` settings (tests: a CA to trust, a short probe wait)."""
        self.limits = limits or RelayLimits()
        """What the relay lets the run have: output per call, token and cost budget."""
        self._key = api_key
        if effort_options is None:
            effort_options = {"reasoningEffort": effort} if effort else {}
        self.config = scaffold_config(provider, model, effort_options)
        self.tally = EventTally()
        self.relay: ProviderRelay | None = None
        self._endpoint: RelayEndpoint = LOCAL
        self._home: Path | None = None
        self._material = ""

    @classmethod
    def for_run(  # type: ignore[override]
        cls,
        *,
        provider: str | None = None,
        model: str = "",
        effort: str | None = None,
        providers_path: Path | None = None,
        any_version: bool = False,
        base_url: str | None = None,
        key_env: str | None = None,
        environ: dict[str, str] | None = None,
        limits: RelayLimits | None = None,
        **_: object,
    ) -> OpencodeAgent:
        """Everything checked before a run starts: provider, key, binary and version, ripgrep,
        and (native clients) the effort. `AgentSetupError` says what to fix.

        `base_url` / `key_env` (a campaign's per-model settings) override the provider entry's;
        with a name the providers file lacks, they define an OpenAI-compatible provider.
        `limits`: the track's output cap and budget, as the run's settings leave them."""
        environ = dict(os.environ) if environ is None else environ
        if not provider:
            raise AgentSetupError(
                "--agent opencode needs --provider NAME (an entry of providers.toml)"
            )
        try:
            entry = override(provider, providers_path, base_url=base_url, key_env=key_env)
        except ProviderError as e:
            raise AgentSetupError(str(e)) from e
        key = environ.get(entry.key_env, "")
        if not key:
            raise AgentSetupError(
                f"provider '{provider}' reads its key from ${entry.key_env}, which is not set: "
                f"export {entry.key_env}=... and run again"
            )
        try:
            binary, version = require(any_version)
        except ScaffoldError as e:
            raise AgentSetupError(str(e)) from e
        options: dict[str, object] | None = None
        if entry.native and effort:
            variants = native_variants(binary, entry, model)
            if effort not in variants:
                known = ", ".join(variants) or "none"
                raise AgentSetupError(
                    f"--effort {effort} is not a reasoning-effort setting opencode {version} "
                    f"knows for {entry.kind}/{model} (known: {known})"
                )
            chosen = variants[effort]
            options = dict(chosen) if isinstance(chosen, dict) else {}
        return cls(
            entry,
            model=model,
            effort=effort,
            api_key=key,
            binary=binary,
            version=version,
            ripgrep=_ripgrep(),
            effort_options=options,
            limits=limits,
        )

    # -- before the run -----------------------------------------------------------------------

    def preflight(self) -> str | None:
        """One tiny call of the harness's own (the relay's probe, sent straight to the
        provider with the run's key, endpoint and model, `PREFLIGHT_TIMEOUT_S` at most), before
        any clock: None when the provider answers it, else one line (what failed, the status,
        the provider's short word; never the key). A failure is judged as during a run: no
        answer, 5xx, 429, or a key, account or model the provider refuses."""
        entry = self.provider_entry
        relay = ProviderRelay(
            kind=entry.kind,
            base_url=entry.base_url,
            model=self.model,
            key=self._key,
            credential=entry.credential,
            **self.relay_options,
        )  # never started: only its probe is used
        result = relay.probe_once(timeout_s=PREFLIGHT_TIMEOUT_S)
        if not result.failed:
            return None
        up = relay.upstream
        where = f"{up.scheme}://{up.netloc}{up.base_path}"
        said = f": {result.detail}" if result.detail else ""
        line = (
            f"provider '{self.provider}' failed the pre-flight call for model '{self.model}' "
            f"at {where}: {result.describe()}{said}"
        )
        if self._key:
            line = line.replace(self._key, "[redacted]")
        line = " ".join(line.split())
        if len(line) > PREFLIGHT_CHARS:
            line = line[: PREFLIGHT_CHARS - 1] + "…"
        return line

    def _folders(self) -> dict[str, Path]:
        assert self._home is not None
        return {
            "HOME": self._home / "home",
            "XDG_CONFIG_HOME": self._home / "config",
            "XDG_DATA_HOME": self._home / "data",
            "XDG_CACHE_HOME": self._home / "cache",
            "XDG_STATE_HOME": self._home / "state",
        }

    def prepare(self, workspace: Path, ctx: AgentContext) -> None:
        if ctx.home_dir is None or ctx.artifacts is None:
            raise AgentSetupError(
                "the opencode agent needs a controller-only home and a run folder"
            )
        self._home = ctx.home_dir
        for folder in self._folders().values():
            folder.mkdir(parents=True, exist_ok=True)
        stall_limit = self.stall_share * ctx.budget_s
        self.relay = self._relay(ctx, stall_limit).start()
        config_dir = self._folders()["XDG_CONFIG_HOME"] / "opencode"
        _prevent_dependency_install(config_dir)
        effective = json.loads(json.dumps(self.config))  # the same, with the relay's URL
        pid = _provider_id(self.provider_entry)
        effective["provider"][pid]["options"]["baseURL"] = self.relay.url
        (config_dir / "opencode.json").write_text(json.dumps(effective, indent=2) + "\n")
        # The binary is copied, not linked: the sandbox hands the workspace's files to its
        # user, which must never own the operator's installed copy.
        target = ctx.bin_dir / "opencode"
        shutil.copyfile(self.binary, target)
        target.chmod(0o755)
        rg = ctx.bin_dir / "rg"
        if not rg.exists():
            rg.symlink_to(self.ripgrep)
        self.tally = EventTally()
        self._material = json.dumps(
            {
                "scaffold": f"opencode {self.version}",
                "ripgrep": _ripgrep_version(self.ripgrep),
                "config": self.config,
                "command": self.command(),
                "switches": SWITCHES,
                "stall_share": self.stall_share,
                "limits": dataclasses.asdict(self.limits),
            },
            sort_keys=True,
        )

    def _relay(self, ctx: AgentContext, stall_limit_s: float) -> ProviderRelay:
        """The run's provider relay, listening where the controller's egress can reach it."""
        assert ctx.artifacts is not None
        try:
            self._endpoint = relay_endpoint(ctx.backend)
        except (RelayPlacementError, OSError) as e:
            raise AgentSetupError(str(e)) from e
        entry = self.provider_entry
        return ProviderRelay(
            kind=entry.kind,
            base_url=entry.base_url,
            model=self.model,
            key=self._key,
            credential=entry.credential,
            log_path=ctx.artifacts / PROVIDER_LOG,
            stall_limit_s=stall_limit_s,
            bind=self._endpoint.bind,
            advertise=self._endpoint.host,
            limits=self.limits,
            prices=entry.cost,
            note=ctx.log,
            **self.relay_options,
        )

    def command(self) -> list[str]:
        argv = ["opencode", "run", "--print-logs", "--log-level", "INFO", "--format", "json"]
        argv += ["--thinking", "--title", TITLE, "--model", str(self.config["model"]), PROMPT]
        return argv

    def env(self) -> dict[str, str]:
        folders = {name: str(path) for name, path in self._folders().items()}
        return {**folders, **SWITCHES, "SHELL": "/bin/bash"}  # no key: the relay has it

    def egress(self) -> list[Egress]:
        """The relay, nothing else (the provider itself is the relay's to reach)."""
        if self.relay is None:
            return []
        return [self._endpoint.egress(self.relay.port)]

    def isolation(self) -> list[str]:
        """The key stays in the harness; the controller reaches the provider only through the
        relay, which filters its calls and alone judges provider failures."""
        return ["controller:provider-relay"] if self.relay is not None else []

    def secrets(self) -> list[str]:
        """The key: never in the controller, and checked out of the workspace and run files."""
        return [self._key]

    def config_sha256(self) -> str:
        """Scaffold version, configuration, command line and switches (never the key)."""
        material = self._material or json.dumps(
            {"scaffold": f"opencode {self.version}", "config": self.config}, sort_keys=True
        )
        return hashlib.sha256(material.encode()).hexdigest()

    # -- while it runs ------------------------------------------------------------------------

    def console(self) -> tuple[str, str]:
        return EVENTS_FILE, LOG_FILE

    def observe(self, stream: str, line: str) -> str | None:
        return self.tally.event(line) if stream == "stdout" else self.tally.log(line)

    def problem(self) -> str | None:
        """The relay's confirmed provider failure; the scaffold's own word only as a note."""
        if self.relay is None:
            return None
        return self._with_claim(self.relay.problem())

    def final_problem(self, exited: bool) -> str | None:
        if self.relay is None:
            return None
        return self._with_claim(self.relay.final_problem(exited))

    def _with_claim(self, problem: str | None) -> str | None:
        claim = self.tally.claim()
        if problem is None or claim is None:
            return problem
        return f"{problem} (opencode said: {claim})"

    # -- after it ------------------------------------------------------------------------------

    def finish(self, controller: Sandbox, artifacts: Path) -> None:
        """Export the session (in the controller, offline) as the transcript."""
        session = self.tally.session_id
        if session is None:
            return
        # Cut in the controller: the session is the model's (and its tools') output, of any size.
        export = f'opencode export "$1" | head -c {EXPORT_CAP_BYTES + 1}'
        done = controller.exec(["sh", "-c", export, "sh", session], timeout=EXPORT_TIMEOUT_S)
        if len(done.stdout) > EXPORT_CAP_BYTES:
            with (artifacts / LOG_FILE).open("a", encoding="utf-8") as f:
                f.write(
                    f"[ari] opencode export is over {EXPORT_CAP_BYTES:,} bytes: not stored "
                    "(events.jsonl keeps the session's events)\n"
                )
            return
        if not done.ok or not done.stdout.strip():
            note = done.stderr.decode(errors="replace").strip()[-500:]
            with (artifacts / LOG_FILE).open("a", encoding="utf-8") as f:
                f.write(f"[ari] opencode export failed ({done.returncode}): {note}\n")
            return
        redacted = done.stdout.replace(self._key.encode(), b"[redacted]")
        (artifacts / TRANSCRIPT_JSON).write_bytes(redacted)

    def close(self) -> None:
        if self.relay is not None:
            self.relay.close()

    def collect(self, workspace: Path, output: str) -> AgentOutcome:
        return AgentOutcome(transcript=None, usage=self.usage())

    def usage(self) -> Usage:
        """The provider's own counts as the relay read them where it reported any, else the
        scaffold's sums; the relay's call and byte counts and the budget in both cases."""
        claimed = self.tally.usage()
        if self.relay is None:
            source = "scaffold" if claimed.input_tokens is not None else None
            return claimed.model_copy(update={"source": source})
        relay, spend = self.relay.totals, self.relay.spend
        counts: dict[str, object] = {
            "max_tokens_total": spend.limits.max_tokens_total,
            "max_cost_usd": spend.limits.max_cost_usd,
            "budget_tokens": spend.tokens,
            "budget_spent": spend.spent is not None,
            "budget_refused_calls": spend.refused,
        }
        if relay.calls:
            counts.update(
                model_calls=relay.calls, bytes_sent=relay.bytes_up, bytes_received=relay.bytes_down
            )
            counts.update(provider_retries=relay.retries, retried_calls=relay.retried_calls)
        if relay.with_usage == 0:
            source = "scaffold" if claimed.input_tokens is not None else None
            return claimed.model_copy(update={"source": source, **counts})
        t = relay.tokens
        cost, cost_source = None, None
        if self.provider_entry.cost:
            cost, cost_source = price(self.provider_entry.cost, t), "providers-file"
        elif spend.cost_usd is not None:
            cost, cost_source = spend.cost_usd, "provider"  # reported with the usage
        elif claimed.cost_usd is not None:
            cost, cost_source = claimed.cost_usd, "scaffold"
        return Usage.model_validate(
            {
                "input_tokens": t.input,
                "output_tokens": t.output,
                "reasoning_tokens": t.reasoning,
                "cache_read_tokens": t.cache_read,
                "cache_write_tokens": t.cache_write,
                "cost_usd": cost,
                "source": "provider",
                "cost_source": cost_source,
                **counts,
            }
        )
