"""`toolkit tracks list / show / new / schema`: the track registry without hand-editing JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from rich.table import Table

from exam_builder.exam_file import MANIFEST_FILE, ExamFileError, load_exam, sha256_file
from exam_builder.manifest import ManifestError, load_manifest
from toolkit.commands.console import make_console, terminal_text
from toolkit.commands.options import (
    find_registry,
    known_track,
    registry_option,
    results_dir_option,
)
from toolkit.results.model import write_json_atomic
from toolkit.tracks.model import (
    TRACKS_FILE,
    GradingParams,
    ProtocolFix,
    RegistryError,
    Track,
    TrainDataRecipe,
    describe,
    load_tracks,
)


def _registry(results_dir: Path, registry: Path | None) -> Path:
    return find_registry(results_dir, registry)


def _load(folder: Path) -> dict[str, Track]:
    try:
        return load_tracks(folder)
    except RegistryError as exc:
        raise click.ClickException(str(exc)) from None


@click.group("tracks")
def tracks_group() -> None:
    """The registry of tracks (results/tracks.json): what a row's runs are comparable under.

    \b
    Examples:
      toolkit tracks list
      toolkit tracks show v1-h100-1h
      toolkit tracks new v2-h100-1h --from v1-h100-1h --exam /secure/exams/v2 \\
          --title "Official v2: one hour on one H100"
    """


@tracks_group.command("list")
@results_dir_option("Results folder holding tracks.json")
@registry_option()
def list_command(results_dir: Path, registry: Path | None) -> None:
    """Every track: id, title, budget, exam hash, protocol revision.

    \b
    Example:
      toolkit tracks list --results /tmp/ari-results
    """
    folder = _registry(results_dir, registry)
    title = terminal_text(f"tracks in {folder / TRACKS_FILE}")
    table = Table(header_style="bold", title=title)
    for column in ("id", "title", "budget", "exam", "questions", "revision", "kind"):
        table.add_column(column)
    for t in _load(folder).values():  # a registry is someone else's text: shown, never obeyed
        table.add_row(
            t.id,
            terminal_text(t.title),
            f"{t.budget_s:.0f}s",
            t.exam_sha256[:8],  # as the site shows it (a hidden exam publishes 8 digits)
            str(t.exam_questions),
            str(t.protocol_revision),
            "demo" if t.demo else "official",
        )
    make_console().print(table)


@tracks_group.command("show")
@click.argument("track_id")
@results_dir_option("Results folder holding tracks.json")
@registry_option()
def show_command(track_id: str, results_dir: Path, registry: Path | None) -> None:
    """One track, every field (JSON).

    \b
    Example:
      toolkit tracks show v1-h100-1h | jq .grading
    """
    click.echo(known_track(results_dir, registry, track_id).model_dump_json(indent=2))


@tracks_group.command("new")
@click.argument("track_id")
@click.option("--from", "base_id", required=True, help="An existing track to start from.")
@click.option(
    "--exam",
    type=click.Path(exists=True, path_type=Path),
    required=True,
    help="The new track's exam (exam.jsonl or its folder): its hash and size are pinned.",
)
@click.option("--title", required=True, help="Human title of the new track.")
@click.option(
    "--description",
    default=None,
    help="One paragraph (default: written from the new track's numbers, never the base's).",
)
@click.option("--budget", type=click.FloatRange(min=1), default=None, help="Budget, seconds.")
@click.option("--hardware", default=None, help="Hardware of the runner, in words.")
@click.option("--gpu-model", default=None, help="GPU model a run needs (e.g. H200), or 'none'.")
@click.option(
    "--publish-prefix",
    type=click.IntRange(8, 64),
    default=None,
    help="Pin only this many hex digits of the exam hash (what may be published).",
)
@results_dir_option("Results folder holding tracks.json")
@registry_option()
def new_command(
    track_id: str,
    base_id: str,
    exam: Path,
    title: str,
    description: str | None,
    budget: float | None,
    hardware: str | None,
    gpu_model: str | None,
    publish_prefix: int | None,
    results_dir: Path,
    registry: Path | None,
) -> None:
    """A new track for a new exam: a copy of another track with the new exam pinned.

    The new track starts at protocol revision 1 with the base's rules (limits, grading,
    isolation floor, seeds); what you pass replaces them. It is added to the registry's
    tracks.json (written atomically); an existing id is refused.

    \b
    Example:
      toolkit tracks new v2-h100-1h --from v1-h100-1h --exam /secure/exams/v2 \\
          --title "Official v2: one hour on one H100" --publish-prefix 8
    """
    folder = _registry(results_dir, registry)
    tracks = _load(folder)
    if track_id in tracks:
        raise click.ClickException(f"track '{track_id}' exists already in {folder / TRACKS_FILE}")
    if base_id not in tracks:
        raise click.ClickException(
            f"unknown track '{base_id}' (known: {', '.join(sorted(tracks)) or 'none'})"
        )
    try:
        questions = load_exam(exam)
    except ExamFileError as exc:
        raise click.ClickException(str(exc)) from None
    digest = sha256_file(exam / "exam.jsonl" if exam.is_dir() else exam)
    chance = _chance_floor(exam.parent if exam.is_file() else exam, digest)
    data: dict[str, Any] = tracks[base_id].model_dump(mode="json")
    data.update(
        id=track_id,
        title=title,
        exam_sha256=digest[:publish_prefix] if publish_prefix else digest,
        exam_questions=len(questions),
        chance_floor=chance,
        protocol_revision=1,
    )
    if description is not None:
        data["description"] = description
    if hardware is not None:
        data["hardware"] = hardware
    if gpu_model is not None:
        data["gpu_model"] = None if gpu_model.lower() == "none" else gpu_model
    if budget is not None:
        data["budget_s"] = budget
        data["per_call_limit_s"] = min(data["per_call_limit_s"], budget)
        data["reserved_s"] = min(data["reserved_s"], budget / 4)
    try:
        track = Track.model_validate(data)
        if description is None:  # the base's words describe the base's numbers, not these
            track = track.model_copy(update={"description": describe(track, base_id)})
    except ValueError as exc:
        raise click.ClickException(f"the new track is not valid: {exc}") from None
    tracks[track_id] = track
    text = json.dumps([t.model_dump(mode="json") for t in tracks.values()], indent=2)
    write_json_atomic(folder / TRACKS_FILE, text + "\n")
    console = make_console()
    console.print(f"added track '{track_id}' to {folder / TRACKS_FILE}")
    floor = "not measured (no manifest beside the exam)" if chance is None else f"{chance}%"
    console.print(f"exam {digest[:8]} ({len(questions)} questions); revision 1")
    console.print(f"chance floor {floor}")
    if description is None:
        console.print(
            "description (--description to write your own): " + terminal_text(track.description)
        )


def _chance_floor(folder: Path, digest: str) -> float | None:
    """The exam's chance floor from the manifest beside it (None when there is none, or when
    it describes another exam: a stale manifest must not lend its number)."""
    path = folder / MANIFEST_FILE
    if not path.is_file():
        return None
    try:
        manifest = load_manifest(path)
    except ManifestError as exc:
        raise click.ClickException(str(exc)) from None
    return manifest.quality.chance_floor if manifest.exam_sha256 == digest else None


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return "see below"
    return f"`{json.dumps(value)}`"


def markdown_tables() -> str:
    """The fields of a track entry, its grading parameters and a protocol fix, as markdown
    tables (what site/docs/maintainers/tracks.md shows; a test keeps them the same)."""
    parts = []
    for title, model in (
        ("A track entry", Track),
        ("Grading parameters (`grading`)", GradingParams),
        ("The training-text recipe (`train_data`)", TrainDataRecipe),
        ("A protocol fix", ProtocolFix),
    ):
        lines = [f"## {title}", "", "| field | default | meaning |", "| --- | --- | --- |"]
        for name, field in model.model_fields.items():
            text = (field.description or "").replace("|", "\\|")
            lines.append(f"| `{name}` | {_default(field)} | {text} |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


@tracks_group.command("schema")
@click.option("--markdown", is_flag=True, help="Tables of the fields, for the docs.")
def schema_command(markdown: bool) -> None:
    """The JSON Schema of a track entry (every field with its description).

    \b
    Example:
      toolkit tracks schema --markdown    # the tables of site/docs/maintainers/tracks.md
    """
    if markdown:
        click.echo(markdown_tables(), nl=False)
        return
    click.echo(json.dumps(Track.model_json_schema(), indent=2))
