"""``kafkatxn config``: show how the connection settings resolve."""

from __future__ import annotations

from dataclasses import dataclass

import typer

from kafkatxn import config as config_mod
from kafkatxn.cli.common import CommandContext, command

app = typer.Typer(help="Connection settings: flags > environment > profile.", no_args_is_help=True)


@dataclass(frozen=True)
class SettingLine:
    key: str
    value: str | int


@command(app, "show")
def show(ctx: CommandContext) -> None:
    """Print the resolved connection settings, secrets masked."""
    resolved = ctx.config
    # The deadline under a key naming its unit, as an integer (not "30000ms"), like every duration key.
    rows = [SettingLine("timeout_ms", resolved.timeout_ms) if k == "timeout" else SettingLine(k, v)
            for k, v in resolved.masked().items()]
    rows.append(SettingLine("profiles_file", str(config_mod.profiles_file())))
    ctx.render(rows, SettingLine)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="config")
