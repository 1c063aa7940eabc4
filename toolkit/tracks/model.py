"""Tracks and protocol fixes: the registry kept in `results/` (DESIGN §7).

A *track* freezes together everything that could shift scores: benchmark version, exam hash,
budget, per-call limit, reserved window, size limit and grading parameters. A *protocol fix*
records a change of protocol semantics within a track: what changed, when, which revision it
introduced, and whether runs graded before it are rerun or kept as legacy.

Files: `results/tracks.json` (a list of tracks) and `results/protocol_fixes.json` (a list of
fixes). Both are validated here; errors name the file and the field. Beside them,
`results/signing_keys.json` names the keys its result files were signed with, a hint only:
signatures count under the keys the maintainers pin (`toolkit.results.signing`).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from toolkit.results import bounded_json
from toolkit.results.published import NotPublishedError, UnsafePathError, read_published

T = TypeVar("T")

# The words a track's isolation floor is written in, and what each means; a host is checked
# against them by `toolkit.host.floor`.
FLOOR_WORDS: dict[str, str] = {
    "roles-isolated": "every role in its own PID and mount namespaces (or container)",
    "no-network": "no network for runner and grader; the controller reaches only its relay",
    "memory-per-tree": "a memory cap on each role's process tree (cgroup)",
    "processes-per-tree": "a process and thread cap on each role's tree (pids cgroup)",
    "gpu-pinned": "the runner and grader see exactly the run's GPU",
}

TRACKS_FILE = "tracks.json"
FIXES_FILE = "protocol_fixes.json"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GradingParams(_Model):
    """How bundles are graded on this track."""

    context_bytes: int = Field(default=1024, gt=0, description="Prompt bytes the model sees.")
    load_timeout_s: float = Field(default=300, gt=0, description="Limit on `load()`.")
    batch_timeout_s: float = Field(default=120, gt=0, description="Limit on one batch call.")
    total_timeout_s: float = Field(default=1800, gt=0, description="Limit on one grading phase.")
    memory_bytes: int = Field(default=32 * 2**30, gt=0, description="Memory limit of the worker.")
    disk_bytes: int = Field(
        default=2 * 2**30, gt=0, description="Limit on what the worker may write, in total."
    )
    batch_size: int = Field(default=32, gt=0, description="Questions per generate() call.")


class TrainDataRecipe(_Model):
    """How a track's training text is made from a public dataset (`toolkit data prepare`).

    The shards are read in the order listed, documents in file order; each document is cleaned
    (`cleaning`), documents are joined with one newline, and reading stops before the first
    document that would take the text past `max_bytes`. The last `val_fraction` of the bytes is
    the validation split. The prepared bytes are pinned by the track's `train_data_sha256` and
    `val_data_sha256`, written by the maintainer who first prepares them (`--record-pin`)."""

    dataset: str = Field(description="The public dataset, e.g. 'HuggingFaceFW/fineweb-edu'.")
    url: str = Field(description="Where the dataset is published.")
    revision: str | None = Field(
        default=None, description="Dataset revision (commit) the shards come from; none: main."
    )
    download: str = Field(description="Command that fetches the shards into a folder.")
    licence: str = Field(description="Licence of the text, e.g. 'ODC-By 1.0'.")
    shards: list[str] = Field(
        min_length=1,
        description="Shard files, relative to the download folder, in reading order (parquet "
        "with a 'text' column); only as many as `max_bytes` needs are read.",
    )
    max_bytes: int = Field(gt=1024, description="Most bytes of prepared text, both splits.")
    val_fraction: float = Field(
        default=0.01, gt=0, lt=1, description="Share of the bytes, at the end, held out."
    )
    cleaning: Literal["utf8-v1"] = Field(
        default="utf8-v1",
        description="Per-document cleaning: 'utf8-v1' = line ends to LF, control characters "
        "other than tab and LF removed, surrounding whitespace stripped, empty documents dropped.",
    )
    source_sha256: str | None = Field(
        default=None,
        pattern=r"^[0-9a-f]{64}$",
        description="SHA-256 over the shard files read (as `toolkit.text.data.source_sha256`); "
        "none: not recorded yet.",
    )


# A track id names files of the site beside the site's own (`leaderboards/<id>.html` beside
# the overview `leaderboards/index.html`, `downloads/<id>.csv` and `.json` beside
# `leaderboard.csv` and `run-result.schema.json`): these would overwrite them.
RESERVED_TRACK_IDS = ("index", "leaderboard", "run-result.schema")


class Track(_Model):
    """A frozen set of rules under which runs are comparable."""

    id: str = Field(
        pattern=r"^[a-z0-9][a-z0-9._-]*$",
        max_length=64,
        description="Track id, used in paths (at most 64 characters; not 'index', "
        "'leaderboard' or 'run-result.schema', the names of the site's own pages and files "
        "beside the tracks').",
    )
    title: str = Field(description="Human title, e.g. 'Official: 1 hour on one H100'.")
    description: str = Field(default="", description="One paragraph about the track.")
    benchmark_version: str = Field(description="Benchmark version, e.g. '1.0'.")
    exam_sha256: str = Field(
        pattern=r"^[0-9a-f]{8,64}$",
        description="SHA-256 of the exam (full, or the published prefix of at least 8 digits).",
    )
    public_set_sha256: str | None = Field(
        default=None, pattern=r"^[0-9a-f]{8,64}$", description="SHA-256 of the public set."
    )
    exam_questions: int = Field(
        gt=0, description="Questions in the exam: every run's score.total must equal it."
    )
    chance_floor: float | None = Field(
        default=None,
        ge=0,
        le=100,
        description="The exam's chance floor, percent: what a blind guesser scores by picking "
        "among each prompt's values of the answer's shape (its manifest's quality.total.chance); "
        "a score near it measures nothing. None: not measured (exams built before it).",
    )
    budget_s: float = Field(gt=0, description="Wall-clock budget of a run.")
    per_call_limit_s: float = Field(gt=0, description="Longest single `runner` call.")
    reserved_s: float = Field(ge=0, description="Final window where new compute is refused.")
    size_limit_bytes: int = Field(gt=0, description="Largest packed bundle (.tar.gz bytes).")
    grading: GradingParams = Field(default_factory=GradingParams, description="Grading.")
    hardware: str = Field(description="Hardware of the runner, e.g. '1x NVIDIA H100 80GB'.")
    gpu_model: str | None = Field(
        default=None,
        description="The GPU model a run needs, as the driver names it (matched as a "
        "substring, e.g. 'H100'); `toolkit run` refuses a host without one. None: no GPU "
        "needed (demo tracks).",
    )
    isolation_floor: list[str] = Field(
        default_factory=list,
        description="Isolation a valid run needs (words of toolkit.host.floor: roles-isolated, "
        "no-network, memory-per-tree, processes-per-tree, gpu-pinned); a run that cannot have "
        "one refuses to start. Empty: the run degrades and records what it lacked.",
    )
    workspace_disk_bytes: int | None = Field(
        default=64 * 2**30,
        gt=0,
        description="Cap on what the agent's workspace holds in total (the copy of the training "
        "data, checkpoints, bundles), where the host can enforce one (else the run records "
        "'root-disk' as not isolated); null: no cap.",
    )
    max_candidates: int = Field(
        default=100,
        gt=0,
        description="Most candidates a run may submit; `runner submit` refuses more (told to "
        "the agent, audited).",
    )
    max_candidate_bytes: int = Field(
        default=1_000_000_000,
        gt=0,
        description="Most packed bytes the candidates of a run may take in all on the results "
        "volume; a submission that would pass it is refused (told to the agent, audited).",
    )
    protocol_revision: int = Field(default=1, ge=1, description="Current protocol revision.")
    seeds_required: int = Field(default=3, ge=1, description="Seeds for a non-provisional row.")
    demo: bool = Field(default=False, description="A demonstration track, not official.")
    train_data_sha256: str | None = Field(
        default=None,
        pattern=r"^[0-9a-f]{8,64}$",
        description="SHA-256 of the prepared training bytes every run must get (full, or a "
        "prefix of at least 8 digits); none: not pinned.",
    )
    val_data_sha256: str | None = Field(
        default=None,
        pattern=r"^[0-9a-f]{8,64}$",
        description="SHA-256 of the prepared validation bytes, pinned like train_data_sha256.",
    )
    max_output_tokens: int = Field(
        default=32_000,
        gt=0,
        description="The most output one model call may ask for: the provider relay lowers "
        "every output limit of a call (max_tokens, max_output_tokens, maxOutputTokens, ...) to "
        "it, and sets it where a call gives none.",
    )
    max_tokens_total: int | None = Field(
        default=100_000_000,
        gt=0,
        description="Token budget of a run: tokens of every part (input, output, reasoning, "
        "cache reads and writes) its model calls may use in all; once spent, the relay refuses "
        "further calls (the run stays valid). A campaign or `toolkit run --max-tokens-total` "
        "may set another; null: no limit.",
    )
    max_cost_usd: float | None = Field(
        default=250.0,
        gt=0,
        description="Cost budget of a run in USD, where its calls can be priced (the providers "
        "file's prices, or the cost the provider reports); enforced like max_tokens_total. A "
        "campaign or `toolkit run --max-cost-usd` may set another; null: no limit.",
    )

    train_data: TrainDataRecipe | None = Field(
        default=None,
        description="The recipe of the training text (`toolkit data prepare --track`); none: "
        "any text, or the default corpus.",
    )

    @field_validator("id")
    @classmethod
    def _not_reserved(cls, track_id: str) -> str:
        if track_id in RESERVED_TRACK_IDS:
            raise ValueError(
                f"'{track_id}' names a page of the site (reserved: "
                f"{', '.join(RESERVED_TRACK_IDS)}); choose another id"
            )
        return track_id

    @field_validator("isolation_floor")
    @classmethod
    def _known_floor(cls, floor: list[str]) -> list[str]:
        unknown = [w for w in floor if w not in FLOOR_WORDS]
        if unknown:
            raise ValueError(
                f"unknown isolation requirement {unknown[0]!r} (known: {', '.join(FLOOR_WORDS)})"
            )
        return floor

    def matches_exam(self, sha256: str) -> bool:
        """Whether a full exam hash agrees with this track's (possibly short) hash."""
        return sha256.startswith(self.exam_sha256)

    def train_data_mismatch(self, train_sha256: str | None, val_sha256: str | None) -> str | None:
        """What differs from the training data this track pins; None when it matches (or when
        nothing is pinned). A hash that was not recorded (None) never matches a pin."""
        for what, pin, got in (
            ("training", self.train_data_sha256, train_sha256),
            ("validation", self.val_data_sha256, val_sha256),
        ):
            if pin is not None and not (got or "").startswith(pin):
                seen = f"{got[:12]}..." if got else "not recorded"
                return f"{what} bytes {seen}, track '{self.id}' pins {pin[:12]}..."
        return None


def _duration(seconds: float) -> str:
    """120 -> '2 minutes', 3600 -> '1 hour', 90 -> '90 seconds' (whole units only)."""
    for unit, size in (("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            n = int(seconds // size)
            return f"{n} {unit}{'s' if n != 1 else ''}"
    return f"{seconds:g} seconds"


def describe(track: Track, base: str | None = None) -> str:
    """One paragraph about a track written from its numbers, so that it cannot disagree with
    them (`tracks new` without --description: a copy must not keep its base's words)."""
    where = track.hardware
    kind = "hidden" if not track.demo else "demo"
    origin = f"A copy of track '{base}' with its own numbers: " if base else ""
    return (
        f"{origin}{_duration(track.budget_s)} of wall-clock time on {where}, at most "
        f"{_duration(track.per_call_limit_s)} per runner call, the last "
        f"{_duration(track.reserved_s)} reserved for submission, bundles of at most "
        f"{track.size_limit_bytes:,} bytes packed, graded on a {track.exam_questions}-question "
        f"{kind} exam with {track.grading.context_bytes:,} bytes of context."
    )


class ProtocolFix(_Model):
    """A change of protocol within a track, and what happened to the runs it affects."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$", description="Fix id, used in links.")
    track: str = Field(description="Track the fix applies to.")
    date: dt.date = Field(description="When the fix took effect.")
    title: str = Field(description="One line: what changed.")
    description: str = Field(description="What was wrong, what changed, why.")
    revision: int = Field(ge=2, description="Protocol revision this fix introduces.")
    action: Literal["rerun", "legacy"] = Field(
        description="rerun: affected runs are rerun; legacy: they stay, labelled, unranked."
    )


class RegistryError(ValueError):
    """A registry file that does not match the model; the message names file and field."""


def _load_list(path: Path, adapter: TypeAdapter[list[T]]) -> list[T]:
    # Read without following a link: the registry is published with the results beside it.
    try:
        raw = bounded_json.loads(read_published(path.parent, path.name).decode("utf-8"))
    except NotPublishedError:
        return []
    except UnsafePathError as exc:
        raise RegistryError(str(exc)) from None
    except json.JSONDecodeError as exc:
        raise RegistryError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from exc
    except UnicodeDecodeError as exc:
        raise RegistryError(f"{path}: not UTF-8 text: {exc.reason}") from exc
    except OSError as exc:
        raise RegistryError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    try:
        return adapter.validate_python(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "(top level)"
        raise RegistryError(f"{path}: field '{field}': {err['msg']}") from exc


def load_tracks(results_dir: Path) -> dict[str, Track]:
    """Tracks by id from `results/tracks.json` (empty when the file does not exist)."""
    tracks = _load_list(results_dir / TRACKS_FILE, TypeAdapter(list[Track]))
    by_id: dict[str, Track] = {}
    for i, track in enumerate(tracks):
        if track.id in by_id:
            raise RegistryError(f"{results_dir / TRACKS_FILE}: field '{i}.id': duplicate track id")
        by_id[track.id] = track
    return by_id


def load_fixes(results_dir: Path, tracks: dict[str, Track]) -> list[ProtocolFix]:
    """Protocol fixes from `results/protocol_fixes.json`, checked against the tracks."""
    path = results_dir / FIXES_FILE
    fixes = _load_list(path, TypeAdapter(list[ProtocolFix]))
    for i, fix in enumerate(fixes):
        if fix.track not in tracks:
            raise RegistryError(f"{path}: field '{i}.track': unknown track '{fix.track}'")
        if fix.revision > tracks[fix.track].protocol_revision:
            raise RegistryError(
                f"{path}: field '{i}.revision': {fix.revision} is newer than track "
                f"'{fix.track}' protocol_revision {tracks[fix.track].protocol_revision}"
            )
    return fixes


def get_track(results_dir: Path, track_id: str) -> Track:
    """One track by id, with a clear error listing the known ones."""
    tracks = load_tracks(results_dir)
    if track_id not in tracks:
        known = ", ".join(sorted(tracks)) or "none"
        raise RegistryError(
            f"unknown track '{track_id}' in {results_dir / TRACKS_FILE} (known there: {known}); "
            "see `toolkit tracks list`, or pass --registry with the folder that registers it"
        )
    return tracks[track_id]
