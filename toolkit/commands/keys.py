"""`toolkit keys`: this machine's result-signing key, and the keys a results folder accepts."""

from __future__ import annotations

from pathlib import Path

import click

from toolkit.commands.options import results_dir_option
from toolkit.results.published import one_line
from toolkit.results.signing import (
    KEYRING_FILE,
    PINNED_FILE,
    SigningError,
    key_path,
    keyring_path,
    load_folder_keyring,
    local_public,
    pin,
    pinned_keys,
    trust,
)


@click.group("keys")
def keys_group() -> None:
    """The key that signs this machine's result files, and the keys a results folder accepts.

    The harness signs every result file it writes with a private key kept in
    $ARI_HOME/keys/ (made on first use, mode 0600; never put it in a results folder). Only
    keys the maintainers pin count: the toolkit's pinned_keys.json (`keys pin`), the lists in
    $ARI_TRUSTED_KEYS, --keys FILE, and this machine's own key. A results folder's
    signing_keys.json is a hint (`keys trust`): `runs validate`, `runs verify`, `leaderboard`
    and the site report a key only it lists as untrusted.

    \b
    Examples:
      toolkit keys show
      toolkit keys pin --holder "ARI Bench operator, gpu-host-1"
      toolkit keys list --results results
    """


@keys_group.command("show")
def show_command() -> None:
    """Print this machine's public key and its id (making the key pair on first use).

    \b
    Example:
      toolkit keys show
    """
    try:
        key = local_public()
    except SigningError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"key id:      {key.id}")
    click.echo(f"public key:  {key.public_key}")
    click.echo(f"holder:      {key.holder}")
    click.echo(f"private key: {key_path()} (keep it there; never commit it)")


@keys_group.command("pin")
@click.option(
    "--file",
    "pin_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=PINNED_FILE,
    show_default=True,
    help="The pinned key list to add it to (default: the toolkit's own).",
)
@click.option("--holder", default=None, help="Who holds the key (default: user@host).")
def pin_command(pin_file: Path, holder: str | None) -> None:
    """Pin this machine's key: add it to the toolkit's pinned_keys.json (or --file).

    A maintainer's act: commit the changed pinned_keys.json after review; every checker that
    installs this version then trusts results this key signed.

    \b
    Example:
      toolkit keys pin --holder "ARI Bench operator, gpu-host-1"
    """
    try:
        key = local_public()
        if holder:
            key = key.model_copy(update={"holder": holder})
        added = pin(key, pin_file)
    except (SigningError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"{'pinned' if added else 'already pinned'}: {key.id} in {pin_file}")


@keys_group.command("trust")
@results_dir_option("The results folder whose signing_keys.json gets this machine's key")
@click.option("--holder", default=None, help="Who holds the key (default: user@host).")
def trust_command(results_dir: Path, holder: str | None) -> None:
    """List this machine's key in a results folder's signing_keys.json (a hint for readers).

    The folder's list says which keys its writers used; it makes no key trusted: checkers
    trust pinned keys only (`toolkit keys pin`).

    \b
    Example:
      toolkit keys trust --results results --holder "ARI Bench operator, gpu-host-1"
    """
    try:
        key = local_public()
        if holder:
            key = key.model_copy(update={"holder": holder})
        added = trust(results_dir, key)
    except SigningError as exc:
        raise click.ClickException(str(exc)) from exc
    where = keyring_path(results_dir)
    click.echo(f"{'added' if added else 'already listed'}: {key.id} in {where}")


@keys_group.command("list")
@results_dir_option("The results folder whose signing_keys.json is listed")
def list_command(results_dir: Path) -> None:
    """List the pinned keys, the keys a results folder names, and its unsigned files.

    \b
    Example:
      toolkit keys list --results results
    """
    path = keyring_path(results_dir)
    try:  # the folder's list: read as every published file is, shown one line per entry
        keyring = load_folder_keyring(results_dir)
    except SigningError as exc:
        raise click.ClickException(one_line(str(exc))) from exc
    try:
        pinned = {k.id: k for k in pinned_keys()}
    except SigningError as exc:
        raise click.ClickException(str(exc)) from exc
    for key in pinned.values():
        click.echo(f"pinned {key.id} {key.public_key} ({key.holder})")
    if not path.is_file():
        click.echo(f"{path}: no {KEYRING_FILE}")
    for key in keyring.keys:
        trusted = "pinned" if key.id in pinned else "NOT pinned: untrusted"
        click.echo(
            one_line(
                f"key {key.id} {key.public_key} ({key.holder}, added {key.added or '?'}; {trusted})"
            )
        )
    for unsigned in keyring.unsigned:
        click.echo(
            one_line(
                f"unsigned {unsigned.track}/{unsigned.run_id}.json sha256 {unsigned.sha256[:12]}"
                f"{f': {unsigned.note}' if unsigned.note else ''}"
            )
        )
