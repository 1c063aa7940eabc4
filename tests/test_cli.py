"""Every `toolkit` command has help text that ends with an example, and `--version` works."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from toolkit import __version__
from toolkit.cli import cli


def test_version() -> None:
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0
    assert __version__ in result.output


def _commands(group: click.Group, prefix: str = "") -> list[tuple[str, click.Command]]:
    found: list[tuple[str, click.Command]] = []
    for name, command in sorted(group.commands.items()):
        found.append((prefix + name, command))
        if isinstance(command, click.Group):
            found.extend(_commands(command, f"{prefix}{name} "))
    return found


@pytest.mark.parametrize(("name", "command"), _commands(cli), ids=lambda v: str(v))
def test_command_has_help_with_example(name: str, command: click.Command) -> None:
    result = CliRunner().invoke(cli, [*name.split(), "--help"])
    assert result.exit_code == 0, result.output
    assert command.help, f"`toolkit {name}` has no help text"
    assert "example" in command.help.lower(), f"`toolkit {name}` help shows no example"
    for param in command.params:
        if isinstance(param, click.Option) and not param.hidden:
            assert param.help, f"`toolkit {name}` option {param.opts[0]} has no help"


def test_short_help_flag() -> None:
    assert CliRunner().invoke(cli, ["-h"]).exit_code == 0
