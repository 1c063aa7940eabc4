"""The campaign file (`campaign.toml`): every run of a board, said once.

    track = "v1-h100-1h"
    agent = "opencode"
    backend = "docker"
    seeds = 3                  # or a list: [0, 1, 2]; default: the track's seeds_required
    results = "results"        # relative to this file
    attempts = 3               # runs an infrastructure failure (`invalid`) may take in all
    exam = "/secure/exam.jsonl"

    [[models]]
    name = "gpt-5"
    provider = "openai"
    efforts = ["low", "high"]

    [[models]]
    name = "my-model"
    provider = "vllm"
    base_url = "http://10.0.0.5:8000/v1"
    key_env = "VLLM_API_KEY"

The file is a pydantic model; a mistake is one line naming the file and the field. A run is
identified by its key (track, model, effort, seed): `plan.py` matches keys to results.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from toolkit.agents import AGENTS
from toolkit.sandbox import BACKENDS
from toolkit.tracks.model import Track

SCRIPTED_MODEL = "scripted-baseline"  # the scripted agent's model name (it has no model)
SCRIPTED_PREFIX = "scripted-"  # what every name of a scripted campaign starts with


class CampaignError(ValueError):
    """A campaign file or setting that cannot be run; the message is one line: what, where."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelEntry(_Model):
    """One model under test, with the efforts to run it at."""

    name: str = Field(min_length=1, description="Model name, as the results and rows show it.")
    provider: str | None = Field(default=None, description="Provider, e.g. 'openai'.")
    efforts: list[str] | None = Field(
        default=None,
        min_length=1,
        description="Reasoning efforts, each its own row; absent: one row without an effort.",
    )
    base_url: str | None = Field(default=None, description="Override of the provider's URL.")
    key_env: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="Environment variable holding the key (override of the provider's).",
    )
    max_concurrent: int | None = Field(
        default=None,
        ge=1,
        description="Most runs of this model at once, whatever the free slots (the provider's "
        "rate limit or the account's budget); default: no limit.",
    )

    @field_validator("efforts")
    @classmethod
    def _distinct(cls, efforts: list[str] | None) -> list[str] | None:
        if efforts is not None and len(set(efforts)) != len(efforts):
            raise ValueError("efforts must be distinct")
        if efforts is not None and any(not e for e in efforts):
            raise ValueError("an effort cannot be empty")
        return efforts

    def effort_list(self) -> list[str | None]:
        return list(self.efforts) if self.efforts else [None]


class CampaignFile(_Model):
    """What `campaign.toml` holds."""

    track: str = Field(min_length=1, description="Track id (results/tracks.json).")
    agent: str = Field(description="Agent scaffold for every run.")
    backend: str = Field(default="local", description="Sandbox backend of every run.")
    models: list[ModelEntry] = Field(min_length=1, description="The models under test.")
    seeds: int | list[int] | None = Field(
        default=None, description="A count (seeds 0..N-1) or a list; default: seeds_required."
    )
    results: Path = Field(default=Path("results"), description="Results folder.")
    attempts: int = Field(default=3, ge=1, description="Runs one key may take while invalid.")
    budget_s: float | None = Field(
        default=None, ge=10, description="Budget override in seconds (demo tracks only)."
    )
    exam: Path | None = Field(default=None, description="The track's exam (demo: built).")
    train_data: Path | None = Field(default=None, description="Training text (default corpus).")
    registry: Path | None = Field(
        default=None, description="Folder of tracks.json when not the results folder."
    )
    cpus_per_run: float | None = Field(
        default=None,
        gt=0,
        description="CPU quota (cores) of each run's runner and gradings, so that runs sharing "
        "a box share its cores fairly; default: none.",
    )
    max_tokens_total: int | None = Field(
        default=None,
        gt=0,
        description="Token budget of each run (all parts of its model calls' usage); default: "
        "the track's max_tokens_total.",
    )
    max_cost_usd: float | None = Field(
        default=None,
        gt=0,
        description="Cost budget of each run in USD, where calls can be priced; default: the "
        "track's max_cost_usd.",
    )
    campaign_max_tokens: int | None = Field(
        default=None,
        gt=0,
        description="Token budget of the whole campaign (every run's model calls together, "
        "invalid runs included); once spent, no more runs start. Default: none.",
    )
    campaign_max_cost_usd: float | None = Field(
        default=None,
        gt=0,
        description="Cost budget of the whole campaign in USD; as campaign_max_tokens.",
    )

    @field_validator("agent")
    @classmethod
    def _known_agent(cls, agent: str) -> str:
        if agent not in AGENTS:
            raise ValueError(f"unknown agent '{agent}' (known: {', '.join(sorted(AGENTS))})")
        return agent

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, backend: str) -> str:
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend '{backend}' (known: {', '.join(BACKENDS)})")
        return backend

    @field_validator("seeds")
    @classmethod
    def _good_seeds(cls, seeds: int | list[int] | None) -> int | list[int] | None:
        if isinstance(seeds, int) and seeds < 1:
            raise ValueError("a seed count must be at least 1")
        if isinstance(seeds, list) and (
            not seeds or any(s < 0 for s in seeds) or len(set(seeds)) != len(seeds)
        ):
            raise ValueError("seeds must be a non-empty list of distinct numbers >= 0")
        return seeds

    @field_validator("models")
    @classmethod
    def _distinct_models(cls, models: list[ModelEntry]) -> list[ModelEntry]:
        names = [m.name for m in models]
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise ValueError(f"model '{dup}' is listed twice")
        return models


def _field_error(path: Path, exc: ValidationError) -> CampaignError:
    """Every problem of the file in one line (a missing [[models]] must not hide the rest)."""
    said = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"]) or "(top level)"
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":  # a typo: name the field it was meant to be
            message += _suggestion(error["loc"])
        said.append(f"field '{where}': {message}")
    return CampaignError(f"{path}: " + "; ".join(said))


def _suggestion(loc: tuple[int | str, ...]) -> str:
    """ ", did you mean 'seeds'?" for a misspelt field at `loc` (a campaign or a [[models]]
    entry's), or the fields it may have when none is close."""
    model: type[BaseModel] = ModelEntry if loc and loc[0] == "models" else CampaignFile
    known = sorted(model.model_fields)
    close = difflib.get_close_matches(str(loc[-1]), known, n=1)
    if close:
        return f", did you mean '{close[0]}'?"
    return f" (its fields: {', '.join(known)})"


def load_campaign_file(path: Path) -> CampaignFile:
    """Read and validate `campaign.toml`; paths in it become relative to its folder."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CampaignError(f"{path}: no such campaign file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CampaignError(f"{path}: cannot read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise CampaignError(f"{path}: invalid TOML: {exc}") from None
    try:
        campaign = CampaignFile.model_validate(raw)
    except ValidationError as exc:
        raise _field_error(path, exc) from None
    if campaign.agent == "scripted":
        for i, model in enumerate(campaign.models):
            if model.provider or model.efforts or model.base_url or model.key_env:
                raise CampaignError(
                    f"{path}: field 'models.{i}': the scripted agent has no model: give it "
                    f"only a name (e.g. '{SCRIPTED_MODEL}')"
                )
            if not model.name.startswith(SCRIPTED_PREFIX):
                raise CampaignError(
                    f"{path}: field 'models.{i}.name': the scripted agent has no model: name "
                    f"its runs '{SCRIPTED_MODEL}' (or another '{SCRIPTED_PREFIX}...' name), "
                    f"never a model's (got '{model.name}')"
                )
    else:
        for i, model in enumerate(campaign.models):
            if not model.provider:
                raise CampaignError(
                    f"{path}: field 'models.{i}.provider': agent '{campaign.agent}' needs the "
                    f"provider of model '{model.name}'"
                )
    base = path.resolve().parent
    updates = {
        name: Path(os.path.normpath(base / value))  # no "campaigns/../" in what it prints
        for name in ("results", "exam", "train_data", "registry")
        if (value := getattr(campaign, name)) is not None and not Path(value).is_absolute()
    }
    return campaign.model_copy(update=updates)


def seeds_of(campaign: CampaignFile, track: Track) -> list[int]:
    """The campaign's seeds: its list, 0..N-1 for a count, or the track's required number."""
    if isinstance(campaign.seeds, list):
        return sorted(campaign.seeds)
    return list(range(campaign.seeds or track.seeds_required))


def check_against_track(path: Path, campaign: CampaignFile, track: Track) -> None:
    """What only the track can say: a budget override is for demo tracks."""
    if campaign.budget_s is not None and not track.demo:
        raise CampaignError(
            f"{path}: field 'budget_s': track '{track.id}' is official and its budget is part "
            "of what it freezes; remove the override"
        )
