"""`manifest.json`: what an exam is, beside the exam file, so that it can be checked and cited.

It holds the exam hash, the count per family, the builder version, the bank id and bank hash,
the mask, the quality report (per family and per tier) and, when the build ran the reference
learner, its table (`learnability`). Never the seed. It has no timestamp, so the same bank builds
the same manifest too.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from exam_builder.exam_file import EXAM_FILE
from exam_builder.learnability import LearnReport
from exam_builder.quality import QualityReport

MANIFEST_VERSION = 1


class ManifestError(ValueError):
    """A manifest that cannot be read; the message names the file and the field."""


class Manifest(BaseModel):
    """The description of one built exam (`manifest.json`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, serialize_by_alias=True)

    manifest_version: int = Field(default=MANIFEST_VERSION, description="Format version.")
    exam_file: str = Field(default=EXAM_FILE, description="The exam file beside this manifest.")
    exam_sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="SHA-256 of the exam file.")
    questions: int = Field(ge=1, description="Questions in the exam.")
    families: dict[str, int] = Field(description="Questions per family, in exam order.")
    builder_version: str = Field(description="exam_builder.BUILDER_VERSION that built it.")
    bank_id: str = Field(description="The bank's id.")
    bank_sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="SHA-256 of the bank.")
    mask: str = Field(description="What stands for earlier answers in a prompt.")
    quality: QualityReport = Field(description="Per-family quality report.")
    learnability: LearnReport | None = Field(
        default=None,
        description="The reference learner's table (`toolkit build-exam --learn`); absent when "
        "it was not run.",
    )
    public_learnability: LearnReport | None = Field(
        default=None,
        description="The public-side learner's table (`toolkit build-exam --learn-public`): "
        "measured beside the reference learner's, not gated; absent when it was not run.",
    )

    def to_json(self) -> str:
        """Deterministic JSON: field order, then families in exam order (not sorted). A
        manifest built without the learner has no `learnability` key at all."""
        data = self.model_dump(mode="json")
        for key in ("learnability", "public_learnability"):
            if data.get(key) is None:
                data.pop(key, None)
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def load_manifest(path: Path) -> Manifest:
    """Read a `manifest.json` (or the one in a directory)."""
    if path.is_dir():
        path = path / "manifest.json"
    try:
        return Manifest.model_validate_json(path.read_bytes())
    except OSError as exc:
        raise ManifestError(f"{path}: cannot read: {exc}") from exc
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "(top level)"
        raise ManifestError(f"{path}: {field}: {err['msg']}") from exc
