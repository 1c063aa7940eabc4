"""`toolkit keys`: this machine's result-signing key, and the keys a results folder accepts."""

from __future__ import annotations

from pathlib import Path

import click

from toolkit.commands.options import results_dir_option
from toolkit.signing import (
    KEYRING_FILE,
    SigningError,
    key_path,
    keyring_path,
    load_keyring,
    local_public,
    trust,
)


@click.group("keys")
def keys_group() -> None:
    """The key that signs this machine's result files, and the keys a results folder accepts.

    The harness signs every result file it writes with a private key kept in
    $ARI_HOME/keys/ (made on first use, mode 0600; never put it in a results folder). A results
    folder lists the public keys it accepts in signing_keys.json; `runs validate`, `runs
    verify`, `leaderboard` and the site treat a file not signed by one of them as unverified.

    \b
    Examples:
      toolkit keys show
      toolkit keys trust --results results
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


@keys_group.command("trust")
@results_dir_option("The results folder whose signing_keys.json gets this machine's key")
@click.option("--holder", default=None, help="Who holds the key (default: user@host).")
def trust_command(results_dir: Path, holder: str | None) -> None:
    """Accept this machine's key in a results folder: list it in its signing_keys.json.

    Commit the changed signing_keys.json with the results it signs: the list is what readers
    of the folder check signatures against, so review every key added to it.

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
    """List the keys a results folder accepts, and the unsigned files it lists.

    \b
    Example:
      toolkit keys list --results results
    """
    path = keyring_path(results_dir)
    try:
        keyring = load_keyring(path)
    except SigningError as exc:
        raise click.ClickException(str(exc)) from exc
    if not path.is_file():
        click.echo(f"{path}: no {KEYRING_FILE}: this folder accepts no signature yet")
    for key in keyring.keys:
        click.echo(f"key {key.id} {key.public_key} ({key.holder}, added {key.added or '?'})")
    for unsigned in keyring.unsigned:
        click.echo(
            f"unsigned {unsigned.track}/{unsigned.run_id}.json sha256 {unsigned.sha256[:12]}"
            f"{f': {unsigned.note}' if unsigned.note else ''}"
        )
