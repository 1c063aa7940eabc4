"""The grade report: what `grade_bundle` returns and `toolkit grade --json` writes.

A bad bundle is a *result*, not an error: `ok` is False (or a question failed) and `reason` says
what went wrong in one line. In a hidden grading (the default) `reason` and `bpb_reason` are
fixed phrases (`publish.HIDDEN_REASONS`: no exit status, signal or batch number), `problems`
name a category per question, never the bundle's text, `bits_per_byte` is clipped to [0, 8] in
steps of 0.25 and the ablated score is rounded down to a tenth of the exam (`publish.py`); the
`timings` stay exact (the operator's; a run publishes a coarse bucket of them). Every field is
described, so the JSON is self-documenting.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from toolkit.results.model import FamilyScore, Score

REPORT_VERSION = 1


class AblationCounts(BaseModel):
    """What the ablation did to the bundle's files."""

    model_config = ConfigDict(extra="forbid")

    python_kept: int = Field(default=0, description="Python source files (*.py) left as they are.")
    tensor_files: int = Field(
        default=0, description="Files of a known tensor format given same-shaped noise."
    )
    tensors: int = Field(default=0, description="Tensors (or torch storages) given noise.")
    random_files: int = Field(
        default=0, description="Other files (or tensor files that did not parse): random bytes."
    )


class QuestionResult(BaseModel):
    """One question of a public grading, as `toolkit grade --questions` shows it. The texts
    are printable: control characters are written as escapes (`questions.printable`), and
    `written` is the bundle's, so a reader shows it as plain text, never as markup."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="The question's id.")
    family: str = Field(description="Its exam family.")
    tier: int | None = Field(default=None, description="Its tier, where the exam marks one.")
    prompt_tail: str = Field(description="The last characters of its prompt.")
    expected: str = Field(description="The answer.")
    written: str | None = Field(
        description="What the bundle wrote, the answer's length of it (None: no usable output)."
    )
    passed: bool = Field(description="Whether it passed (exact match).")
    problem: str | None = Field(default=None, description="Why its output was refused, if so.")


class Ablation(BaseModel):
    """The weights ablation of one grading, as the grade report carries it."""

    model_config = ConfigDict(extra="forbid")

    score: Score | None = Field(
        default=None, description="Phase 1 score with the weights replaced by noise; None: not run."
    )
    model_free_suspect: bool | None = Field(
        default=None,
        description="The ablated score keeps most of the real one (see "
        "`ablation.SUSPECT_SHARE` and "
        "`SUSPECT_FLOOR_PERCENT`); None: not run.",
    )
    note: str = Field(description="One fixed line: how the ablated pass went.")
    counts: AblationCounts = Field(default_factory=AblationCounts, description="What was replaced.")
    seconds: float = Field(default=0.0, description="Wall-clock seconds: ablating and phase 1.")


class Timings(BaseModel):
    """Wall-clock seconds of each part of the grading."""

    model_config = ConfigDict(extra="forbid")

    pack: float = Field(default=0.0, description="Packing (or reading) the archive.")
    load: float = Field(
        default=0.0, description="Phase 1 worker start: sandbox, interpreter, imports, load()."
    )
    phase1: float = Field(default=0.0, description="Greedy generation of every answer.")
    phase2: float = Field(default=0.0, description="Bits per byte, including its own start.")
    total: float = Field(default=0.0, description="Everything, from packing to the last result.")


class GradeReport(BaseModel):
    """The outcome of grading one bundle on one exam."""

    model_config = ConfigDict(extra="forbid")

    version: int = Field(default=REPORT_VERSION, description="Version of this report format.")
    ok: bool = Field(description="False when the bundle failed as a whole (size, load, crash).")
    reason: str | None = Field(
        default=None,
        description="One line: what went wrong, if anything (a hidden grading: a category only).",
    )
    score: Score = Field(description="Exact-match pass rate: the official score.")
    score_measured: bool = Field(
        default=True,
        description="False when phase 1 did not run (`--phase bpb`): `score` and `families` "
        "then hold zeros that measured nothing.",
    )
    families: dict[str, FamilyScore] = Field(description="Pass counts per exam family.")
    bits_per_byte: float | None = Field(
        default=None,
        description="Bits per byte on the answer spans (None: not measured; a hidden grading: "
        "clipped to [0, 8], a multiple of 0.25).",
    )
    bpb_reason: str | None = Field(
        default=None, description="Why bits per byte is missing (a hidden grading: a category)."
    )
    sha256: str | None = Field(default=None, description="SHA-256 of the packed bundle.")
    packed_bytes: int | None = Field(default=None, description="Size of the packed bundle.")
    size_limit_bytes: int = Field(description="The size limit the bundle was held to.")
    exam_sha256: str = Field(description="SHA-256 of the exam file graded against.")
    backend: str = Field(description="Sandbox backend the worker ran in.")
    device: str = Field(description="Device passed to the bundle's load().")
    isolation: list[str] = Field(default_factory=list, description="Protections in force.")
    not_isolated: list[str] = Field(
        default_factory=list, description="What the sandbox could not isolate on this host."
    )
    timings: Timings = Field(default_factory=Timings, description="Seconds per part.")
    passed_ids: list[str] = Field(default_factory=list, description="Ids of passed questions.")
    problems: list[str] = Field(
        default_factory=list,
        description="Per-question problems (wrong length or type), capped; a hidden grading "
        "names the category only ('q17: wrong length').",
    )
    notes: list[str] = Field(
        default_factory=list,
        description="What the grader changed to fit this host (e.g. a memory cap lowered).",
    )
    weights_ablation: Score | None = Field(
        default=None,
        description="Phase 1 score with every non-Python file of the bundle replaced by noise "
        "(the model-free diagnostic, toolkit/grading/ablation.py; a hidden grading: the count "
        "rounded down to a tenth of the exam); None: not run.",
    )
    model_free_suspect: bool | None = Field(
        default=None,
        description="True when the ablated score keeps most of the real one and is above a "
        "floor: the score does not need the weights; None: not run.",
    )
    ablation: Ablation | None = Field(
        default=None, description="The ablated pass in full: note, files replaced, seconds."
    )
    questions: list[QuestionResult] | None = Field(
        default=None,
        description="Each question: family, tier, prompt tail, answer, output, pass; only for "
        "an exam its manifest marks public, when asked (`toolkit grade --questions`); None "
        "otherwise, and always on a hidden exam.",
    )
