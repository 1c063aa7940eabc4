"""The per-run result: one JSON file per run under `results/<track>/<run_id>.json`.

This is the only thing the site reads (DESIGN §6). It is a versioned pydantic model; every field
carries a description, which is also what the exported JSON Schema documents. Bump
`SCHEMA_VERSION` on any change that an older reader could misread.
"""

from __future__ import annotations

import json
import os
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from toolkit.results import bounded_json, signing
from toolkit.results.published import UnsafePathError, read_published, relative_to_root
from toolkit.results.signing import Signature

SCHEMA_VERSION = 1

RunStatus = Literal["valid", "failed", "invalid"]


class _Model(BaseModel):
    # Unknown fields are an error: a typo in a results file must not pass silently.
    model_config = ConfigDict(extra="forbid", frozen=False)


class Score(_Model):
    """The official score: exact-match pass rate on the hidden exam."""

    percent: float = Field(ge=0, le=100, description="Percent of exam questions passed (0-100).")
    passed: int = Field(ge=0, description="Questions whose greedy completion matched exactly.")
    total: int = Field(gt=0, description="Questions in the exam (the track's exam_questions).")

    @model_validator(mode="after")
    def _consistent(self) -> Score:
        if self.passed > self.total:
            raise ValueError(f"passed ({self.passed}) exceeds total ({self.total})")
        expected = 100.0 * self.passed / self.total
        if abs(self.percent - expected) > 1e-6:
            raise ValueError(f"percent {self.percent} does not equal 100*passed/total {expected}")
        return self


class FamilyScore(_Model):
    """Pass count of one exam family."""

    passed: int = Field(ge=0, description="Questions of this family passed.")
    total: int = Field(ge=0, description="Questions of this family in the exam.")


class TrainData(_Model):
    """The training text a run was given, pinned by hash (a track may require exact bytes)."""

    source: str = Field(description="Where the text came from (a path, or 'default corpus').")
    source_sha256: str = Field(
        pattern=r"^[0-9a-f]{64}$",
        description="SHA-256 of the source: a file's bytes; for a folder, every file read "
        "(relative path, NUL, 8-byte length, bytes) in reading order.",
    )
    train_sha256: str = Field(
        pattern=r"^[0-9a-f]{64}$", description="SHA-256 of the prepared training bytes."
    )
    val_sha256: str = Field(
        pattern=r"^[0-9a-f]{64}$", description="SHA-256 of the prepared validation bytes."
    )
    train_bytes: int = Field(ge=0, description="Prepared training bytes.")
    val_bytes: int = Field(ge=0, description="Prepared validation bytes.")
    not_text_share: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="Share of the prepared bytes that are not text (invalid UTF-8, control).",
    )


class Candidate(_Model):
    """One submission the agent made during the run."""

    id: str = Field(description="Candidate id as printed by `runner submit` (e.g. 'c003').")
    submitted_at: datetime = Field(description="When it was submitted (UTC).")
    elapsed_s: float = Field(ge=0, description="Seconds since the run started.")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="SHA-256 of the packed bundle.")
    packed_bytes: int = Field(ge=0, description="Size of the packed .tar.gz.")
    public_score: float | None = Field(
        default=None, ge=0, le=100, description="Percent passed on the public validation set."
    )
    error: str | None = Field(default=None, description="Why public scoring failed, if it did.")


class PromotedCandidate(_Model):
    """The candidate the agent promoted last: the one graded on the hidden exam."""

    id: str = Field(description="Candidate id.")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="SHA-256 of the packed bundle.")
    packed_bytes: int = Field(ge=0, description="Size of the packed bundle in bytes.")
    promoted_at: datetime = Field(description="When it was promoted (UTC).")
    elapsed_s: float = Field(ge=0, description="Seconds since the run started, at promotion.")


class Timings(_Model):
    """Wall-clock accounting of the run."""

    budget_s: float = Field(gt=0, description="The run's wall-clock budget in seconds.")
    used_s: float = Field(ge=0, description="Seconds from start until the agent stopped.")
    runner_s: float = Field(ge=0, description="Seconds spent inside `runner` compute calls.")
    grading_s: float | None = Field(
        default=None,
        ge=0,
        description="How long the final (hidden) grading took, as a bucket: 0 = under a "
        "minute, 60 = one to ten minutes, 600 = ten minutes or more (a finer time is a channel "
        "the graded bundle could steer; see site/docs/security/channels.md). Files written "
        "before this rule hold exact seconds.",
    )


class Usage(_Model):
    """Model usage, summed over the run's model calls (`source` says who counted them).

    The parts do not overlap (opencode's convention): the prompt a provider bills is
    input + cache_read + cache_write tokens, its completion output + reasoning tokens.
    """

    input_tokens: int | None = Field(
        default=None, ge=0, description="Prompt tokens, not counting cache reads or writes."
    )
    output_tokens: int | None = Field(
        default=None, ge=0, description="Completion tokens, not counting reasoning."
    )
    reasoning_tokens: int | None = Field(default=None, ge=0, description="Reasoning tokens.")
    cache_read_tokens: int | None = Field(
        default=None, ge=0, description="Prompt tokens read from the provider's cache."
    )
    cache_write_tokens: int | None = Field(
        default=None, ge=0, description="Prompt tokens written to the provider's cache."
    )
    cost_usd: float | None = Field(default=None, ge=0, description="Cost in USD, when known.")
    source: Literal["provider", "scaffold"] | None = Field(
        default=None,
        description="Who counted the tokens: 'provider' = the usage fields of the provider's own "
        "answers, read by the harness's relay outside the agent's reach (trustworthy); "
        "'scaffold' = summed from the agent scaffold's own step events (the agent's commands "
        "could alter them); null = no count.",
    )
    cost_source: Literal["providers-file", "provider", "scaffold"] | None = Field(
        default=None,
        description="Where cost_usd comes from: the prices in the providers file times these "
        "tokens, the cost the provider reported with its usage (read by the relay), or the "
        "scaffold's own pricing of its steps; null = no cost.",
    )
    model_calls: int | None = Field(
        default=None, ge=0, description="Model calls the harness's relay passed to the provider."
    )
    bytes_sent: int | None = Field(
        default=None, ge=0, description="Request bytes the relay sent to the provider."
    )
    bytes_received: int | None = Field(
        default=None, ge=0, description="Answer bytes the relay received from the provider."
    )
    provider_retries: int | None = Field(
        default=None,
        ge=0,
        description="Times the relay sent a model call again after the provider answered 'not "
        "now' (429, 5xx, no connection) before any byte of its answer; not in model_calls.",
    )
    retried_calls: int | None = Field(
        default=None, ge=0, description="Model calls the relay had to send more than once."
    )
    max_tokens_total: int | None = Field(
        default=None, ge=1, description="The run's token budget in force at the relay; null: none."
    )
    max_cost_usd: float | None = Field(
        default=None, gt=0, description="The run's cost budget (USD) in force; null: none."
    )
    budget_tokens: int | None = Field(
        default=None,
        ge=0,
        description="Tokens the relay counted against the token budget: every part of each "
        "answered call's usage (a call answered without usage: one per 4 bytes moved).",
    )
    budget_spent: bool | None = Field(
        default=None,
        description="Whether the budget ran out, so that the relay refused further model calls "
        "(the run's own doing: it stays valid); null: no relay.",
    )
    budget_refused_calls: int | None = Field(
        default=None, ge=0, description="Model calls the relay refused once the budget was spent."
    )


class EffectiveConfig(_Model):
    """Everything that could change a score, pinned so that deviations are detectable."""

    toolkit_version: str = Field(description="Version of this toolkit.")
    git_commit: str | None = Field(default=None, description="Toolkit git commit, when known.")
    image_digests: dict[str, str | None] = Field(
        default_factory=dict,
        description="Image digest per role (controller, runner, grader); null on local backend.",
    )
    task_brief_sha256: str = Field(description="SHA-256 of the TASK.md handed to the agent.")
    scaffold_version: str | None = Field(default=None, description="Agent scaffold version.")
    scaffold_config_sha256: str | None = Field(
        default=None, description="SHA-256 of the scaffold's per-run configuration."
    )
    exam_sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="SHA-256 of exam.jsonl.")
    public_set_sha256: str = Field(
        pattern=r"^[0-9a-f]{64}$", description="SHA-256 of the public validation set."
    )
    grading: dict[str, float | int | str] = Field(
        default_factory=dict, description="Grading parameters (context bytes, limits, ...)."
    )
    budget: dict[str, float | int] = Field(
        default_factory=dict, description="Budget parameters (budget, per-call, reserved)."
    )
    backend: Literal["docker", "local"] = Field(description="Sandbox backend.")
    isolation: list[str] = Field(
        default_factory=list,
        description="Isolation in force, e.g. 'netns', 'pgroup', 'scrubbed-env'.",
    )
    protocol_revision: int = Field(ge=1, description="Protocol revision the run was graded under.")
    train_data: TrainData | None = Field(
        default=None, description="The training text handed to the agent, by hash."
    )


class Placement(_Model):
    """Where the run ran: lets a campaign show that no two concurrent runs shared a GPU."""

    node: str = Field(
        min_length=1, description="The machine: its host name, or its Ray node id in a campaign."
    )
    gpu: str | None = Field(
        default=None,
        description="GPU id (index or UUID) the runner and grading were pinned to; null: not "
        "pinned (the backend's default devices).",
    )
    cpus: float | None = Field(
        default=None,
        gt=0,
        description="CPU quota (cores) of the runner and of each grading; null: none (the "
        "host's cores, shared).",
    )


class LogHead(_Model):
    """Where one append-only log of the run (audit log, submission history) ended at publication.

    Each line of such a log holds the hash of the line before it, so an edited line breaks the
    chain; but a log rewritten whole, with fresh hashes, is a valid chain again. Its last hash,
    recorded here when the run is published, is what such a rewrite cannot keep.
    """

    entries: int = Field(ge=0, description="Lines in the log when the run was published.")
    sha256: str = Field(
        pattern=r"^[0-9a-f]{64}$",
        description="SHA-256 of its last line: the chain's head (64 zeros for an empty log).",
    )


InvalidCheck = Literal[
    "runner-reference",
    "grading-reference",
    "harness-error",
    "harness-died",
    "interrupted",
    "provider",
    "run-log",
    "archive",
    "storage",
]
"""What showed a run `invalid`, each a check the sandboxed code cannot pass or fail itself:
runner-reference / grading-reference = the harness's own command or bundle failed too, in
fresh sandboxes; harness-error = the harness raised (a bug of ours); harness-died = its process
was gone (`runs recover`); interrupted = stopped from outside; provider = the model provider
failed, as the harness's relay saw it; run-log = a log no longer held what the harness wrote;
archive = a stored archive was missing or changed; storage = the results volume filled while
the run had stored less than it was promised."""


class InvalidEvidence(_Model):
    """Why a run is `invalid`: the check that failed, signed with the result (`runs verify`
    requires it, and repeats what it can)."""

    check: InvalidCheck = Field(description="Which check failed (see `InvalidCheck`).")
    detail: str = Field(
        max_length=2000, description="What that check found (the harness's own words)."
    )


class RunResult(_Model):
    """One agent run, as published. The site reads nothing else."""

    schema_version: Literal[1] = Field(default=1, description="Version of this file format.")
    run_id: str = Field(pattern=r"^[A-Za-z0-9._-]+$", description="Unique id of the run.")
    track: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$", description="Track id (see tracks).")
    model: str = Field(min_length=1, description="Model under test, e.g. 'gpt-5'.")
    provider: str | None = Field(default=None, description="Model provider, e.g. 'openai'.")
    effort: str | None = Field(default=None, description="Reasoning effort; part of row identity.")
    agent: str = Field(description="Agent scaffold: 'opencode' or 'scripted'.")
    agent_version: str | None = Field(default=None, description="Scaffold version.")
    seed: int = Field(ge=0, description="Run seed.")
    started_at: datetime = Field(description="Start time (UTC).")
    finished_at: datetime | None = Field(
        default=None,
        description="End time (UTC): for a run whose promoted candidate was graded, when that "
        "hidden grading started (its length is published only as `timings.grading_s`).",
    )
    status: RunStatus = Field(
        description="valid: graded; failed: no promoted candidate, or it failed grading "
        "(scores 0); "
        "invalid: infrastructure failure, to be rerun, never averaged."
    )
    status_reason: str | None = Field(default=None, description="Why failed or invalid.")
    evidence: InvalidEvidence | None = Field(
        default=None,
        description="For an invalid run: the check that failed (signed with the rest); "
        "null for valid and failed runs, and in files written before it was recorded.",
    )
    interrupted: bool = Field(
        default=False,
        description="invalid because the run was stopped from outside (the operator, a signal, "
        "its campaign driver dying), not because its infrastructure failed: a campaign reruns "
        "it without counting an attempt.",
    )
    score: Score = Field(description="Official score on the hidden exam.")
    bits_per_byte: float | None = Field(
        default=None,
        ge=0,
        description="Bits-per-byte on the hidden answer spans (diagnostic), clipped to [0, 8] "
        "and rounded to a multiple of 0.25; null: phase 2 gave none.",
    )
    families: dict[str, FamilyScore] = Field(
        default_factory=dict, description="Pass counts per exam family."
    )
    promoted: PromotedCandidate | None = Field(
        default=None, description="The graded candidate; null when none was promoted."
    )
    candidates: list[Candidate] = Field(
        default_factory=list, description="Every candidate submitted, in order."
    )
    timings: Timings = Field(description="Budget and time used.")
    usage: Usage = Field(default_factory=Usage, description="Token usage and cost.")
    config: EffectiveConfig = Field(description="The effective configuration of the run.")
    artifacts: dict[str, str] = Field(
        default_factory=dict,
        description="Run artifacts, relative to the results file (audit log, history, transcript).",
    )
    files: dict[str, str] | None = Field(
        default=None,
        description="SHA-256 of every file of the run folder (audit log, history, transcript, "
        "agent.log, candidate archives, anything else), by path relative to the results file; "
        "`toolkit runs validate` checks each, and that the folder holds nothing else. null "
        "only in files written before results hashed them.",
    )
    logs: dict[str, LogHead] = Field(
        default_factory=dict,
        description="Final chain head of each chained log among the artifacts ('audit', "
        "'history') when the run was published; `toolkit runs validate` and `runs verify` "
        "check the files still end there.",
    )
    placement: Placement | None = Field(
        default=None, description="Where the run ran (node, pinned GPU); null in older files."
    )
    weights_ablation: Score | None = Field(
        default=None,
        description="Model-free diagnostic: the promoted bundle's phase-1 score with every "
        "non-Python file replaced by noise (a trained model collapses, hand-written rules do "
        "not), its pass count rounded down to a tenth of the exam; null: not run (older "
        "files, or the grading failed).",
    )
    model_free_suspect: bool | None = Field(
        default=None,
        description="True when the ablated score keeps most of the real one and is above a "
        "floor (toolkit/grading/ablation.py): flagged for a maintainer's review, score "
        "unchanged; null: not run.",
    )
    signature: Signature | None = Field(
        default=None,
        description="The harness's ed25519 signature of this file less this field (see "
        "toolkit/results/signing.py; the key is listed in the results folder's signing_keys.json); "
        "null only in files written before results were signed.",
    )

    @field_validator("artifacts", "files")
    @classmethod
    def _plain_paths(cls, paths: dict[str, str] | None) -> dict[str, str] | None:
        """A path in the folder is a file name: no NUL or other control character (the
        system refuses a NUL, and a line break would forge a line of the reports)."""
        for path in [*(paths or {}).values(), *(paths or {})] if paths else []:
            if any(not c.isprintable() for c in path):
                raise ValueError(f"{ascii(path)[:80]}: a control character in a path")
        return paths

    @field_validator("families")
    @classmethod
    def _families_add_up(
        cls, families: dict[str, FamilyScore], info: ValidationInfo
    ) -> dict[str, FamilyScore]:
        """Per-family counts are the same exam cut by family: they must add up to the score."""
        score = info.data.get("score")
        if not families or not isinstance(score, Score):
            return families
        for name, fam in families.items():
            if fam.passed > fam.total:
                raise ValueError(f"family '{name}': passed {fam.passed} > total {fam.total}")
        passed = sum(f.passed for f in families.values())
        total = sum(f.total for f in families.values())
        if (passed, total) != (score.passed, score.total):
            raise ValueError(
                f"the families add up to {passed}/{total} but the score is "
                f"{score.passed}/{score.total}"
            )
        return families

    @model_validator(mode="after")
    def _status_rules(self) -> RunResult:
        if self.status == "failed" and self.score.passed != 0:
            raise ValueError("a failed run scores 0")
        if self.status != "valid" and not self.status_reason:
            raise ValueError(f"status '{self.status}' needs a status_reason")
        if self.evidence is not None and self.status != "invalid":
            raise ValueError(f"a {self.status} run carries no evidence of invalidity")
        return self

    @property
    def best_public_score(self) -> float | None:
        """Best public-validation score over the run's candidates."""
        scores = [c.public_score for c in self.candidates if c.public_score is not None]
        return max(scores) if scores else None


class ResultsError(ValueError):
    """A results file that does not match the model; the message names the file and field."""


def _describe(path: Path, exc: ValidationError) -> str:
    first = exc.errors()[0]
    field = ".".join(str(p) for p in first["loc"]) or "(top level)"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{path}: field '{field}': {first['msg']}{more}"


def read_result_file(path: Path) -> bytes:
    """The bytes of the results file `path` (`<root>/<track>/<run_id>.json`), read without
    following a link on the way from `<root>` (`toolkit.results.published`): a track folder or
    a file that is a link is refused, with a `ResultsError` naming it."""
    full = Path(os.path.abspath(path))
    root = full.parent.parent if full.parent.name else full.parent
    try:
        return read_published(root, relative_to_root(root, full))
    except UnsafePathError as exc:
        raise ResultsError(str(exc)) from None
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read: {exc.strerror or exc}") from None


def parse_run(path: Path, data: bytes) -> RunResult:
    """Validate the bytes of the results file `path`, raising `ResultsError` naming the file
    and the field."""
    try:
        raw = bounded_json.loads(data.decode("utf-8"))
    except json.JSONDecodeError as exc:
        raise ResultsError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from exc
    except UnicodeDecodeError as exc:
        raise ResultsError(f"{path}: cannot read: {exc}") from exc
    try:
        return RunResult.model_validate(raw)
    except ValidationError as exc:
        raise ResultsError(_describe(path, exc)) from exc


def load_run(path: Path) -> RunResult:
    """Read (`read_result_file`) and validate one results file, raising `ResultsError` naming
    file and field."""
    return parse_run(path, read_result_file(path))


def _umask() -> int:
    """This process's umask, read without changing it (another thread may be creating files)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    old = os.umask(0o022)  # no /proc: the classic read-by-setting
    os.umask(old)
    return old


def write_json_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` so that readers see the old file or the new one, never a part.

    The file gets the mode an ordinary `open()` would give it (0644 under umask 022), not the
    0600 of a temporary file: results, tracks.json and protocol_fixes.json are public records
    that a publisher, CI or web server running as another user must read (their signatures,
    not their mode, protect them)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_run(result: RunResult, results_dir: Path) -> Path:
    """Sign `result` with this machine's key (setting its `signature`) and write
    `results/<track>/<run_id>.json` atomically; return its path.

    Every writer of result files (a run, a recovered run, a campaign's driver) comes here: this
    is the one place that signs. A results folder without a key list gets one listing this
    machine's key (`toolkit.results.signing.start_keyring`)."""
    path = results_dir / result.track / f"{result.run_id}.json"
    result.signature = None
    result.signature = signing.sign(json.loads(result.model_dump_json()))
    signing.start_keyring(results_dir)
    write_json_atomic(path, result.model_dump_json(indent=2) + "\n")
    return path


def json_schema() -> str:
    """The JSON Schema of a results file, for other tools."""
    return json.dumps(RunResult.model_json_schema(), indent=2, sort_keys=True) + "\n"
