"""`toolkit data prepare`: the training text of a track (or any text) as train.bin / val.bin."""

from __future__ import annotations

import json
from pathlib import Path

import click

from toolkit.commands.options import find_registry, registry_option, results_dir_option
from toolkit.text.data import (
    DataError,
    PreparedData,
    is_prepared,
    prepare_recipe,
    prepare_train_data,
)
from toolkit.tracks.model import RegistryError, Track, get_track


@click.group("data")
def data_group() -> None:
    """Training text: prepare it, and check it against a track's pin.

    \b
    Example:
      toolkit data prepare --track v1-h100-1h --source /data/fineweb-edu --out /data/v1
    """


def _pin(track: Track, prepared: PreparedData) -> dict[str, object]:
    """The fields of tracks.json that pin what was just prepared."""
    recipe = track.train_data
    pin: dict[str, object] = {
        "train_data_sha256": prepared.train_sha256,
        "val_data_sha256": prepared.val_sha256,
    }
    if recipe is not None:
        pin["train_data"] = {"source_sha256": prepared.source_sha256}
    return pin


def _check_pin(track: Track, prepared: PreparedData) -> str | None:
    """What differs from the track's pin (prepared bytes and, for a recipe, the shards read)."""
    mismatch = track.train_data_mismatch(prepared.train_sha256, prepared.val_sha256)
    recipe = track.train_data
    pinned_source = recipe.source_sha256 if recipe is not None else None
    if mismatch is None and pinned_source and prepared.source_sha256 != pinned_source:
        mismatch = (
            f"shards read {prepared.source_sha256[:12]}..., recipe pins "
            f"{pinned_source[:12]}... (another download or revision)"
        )
    return mismatch


@data_group.command("prepare")
@click.option("--track", "track_id", default=None, help="Prepare this track's training text.")
@click.option(
    "--source",
    type=click.Path(exists=True, path_type=Path),
    default=None,
    help="The downloaded shards of the track's recipe (a folder), or any text source "
    "(.txt, .jsonl, .parquet, a folder of those); none: the default corpus.",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Folder to write train.bin, val.bin and meta.json into.",
)
@click.option(
    "--record-pin",
    is_flag=True,
    help="For a track whose recipe has no pin yet: prepare anyway and print the pin to put "
    "into tracks.json.",
)
@results_dir_option("Results folder holding tracks.json")
@registry_option()
def prepare_command(
    track_id: str | None,
    source: Path | None,
    out_dir: Path,
    record_pin: bool,
    results_dir: Path,
    registry: Path | None,
) -> None:
    """Prepare training text into OUT (train.bin, val.bin, meta.json) and check the track's pin.

    With --track, a track with a recipe (`train_data` in tracks.json) is prepared from its
    downloaded shards (--source, the download folder; or a folder prepared earlier, checked
    again) and the result must match the track's SHA-256 pin; a recipe without a pin is
    refused unless --record-pin, which prints the pin.
    Without --track: --source as it is, or the default corpus. Pass OUT to `toolkit run
    --train-data`.

    \b
    Examples:
      toolkit data prepare --out /data/demo
      toolkit data prepare --track v1-h100-1h --source /data/fineweb-edu --out /data/v1
    """
    if record_pin and track_id is None:
        raise click.UsageError("--record-pin records the pin of a track: pass --track")
    track = None
    if track_id is not None:
        try:
            track = get_track(find_registry(results_dir, registry, track_id), track_id)
        except RegistryError as exc:
            raise click.UsageError(str(exc)) from exc
    recipe = track.train_data if track is not None else None
    pinned = track is not None and bool(track.train_data_sha256 or track.val_data_sha256)
    if track is not None and recipe is not None:
        if source is None:
            raise click.UsageError(
                f"track '{track.id}' trains on {recipe.dataset}: download it first "
                f"({recipe.download}) and pass the folder with --source"
            )
        if record_pin and is_prepared(source):
            raise click.UsageError(
                "--record-pin reads the downloaded shards, not a prepared folder"
            )
        if not pinned and not record_pin:
            raise click.UsageError(
                f"track '{track.id}' names its training text but pins no hash yet: a "
                "maintainer prepares it once with --record-pin and puts the printed pin into "
                "tracks.json"
            )
    try:
        if recipe is not None and source is not None and not is_prepared(source):
            click.echo(f"preparing {recipe.dataset} by the recipe of track '{track_id}'...")
            prepared = prepare_recipe(recipe, source, out_dir)
        else:
            prepared = prepare_train_data(source, out_dir)
    except DataError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(
        f"{out_dir}: {prepared.train_bytes:,} training bytes (sha256 {prepared.train_sha256}), "
        f"{prepared.val_bytes:,} validation bytes (sha256 {prepared.val_sha256}), "
        f"{prepared.documents:,} document{'' if prepared.documents == 1 else 's'}"
    )
    if track is None:
        return
    if record_pin and not pinned:
        click.echo(f"pin for track '{track.id}' in tracks.json:")
        click.echo(json.dumps(_pin(track, prepared), indent=2))
        return
    if not pinned:
        click.echo(f"track '{track.id}' pins no training text: any text is accepted")
        return
    mismatch = _check_pin(track, prepared)
    if mismatch:
        raise click.ClickException(
            f"{out_dir}: not the training text of track '{track.id}' ({mismatch})"
        )
    click.echo(f"matches the pin of track '{track.id}': pass --train-data {out_dir}")
