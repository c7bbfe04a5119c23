"""The `command` decorator: shared options on every command, own options kept."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from typer.testing import CliRunner

from kafkatxn.cli.common import CommandContext, command


def test_own_options_survive_postponed_annotations_and_shared_options_are_added():
    # This module uses `from __future__ import annotations`: the annotations below are strings.
    app = typer.Typer()
    seen = {}

    @command(app, "probe")
    def probe(ctx: CommandContext, name: Annotated[Optional[str], typer.Option("--name")] = None, count: int = 3) -> int:
        seen.update(name=name, count=count, output=ctx.output, timeout=ctx.timeout, bootstrap=ctx.bootstrap_server)
        return 1

    @app.command("other")
    def other() -> None:  # a second command keeps typer from collapsing the group
        pass

    result = CliRunner().invoke(app, ["probe", "--name", "zz", "--count", "5", "-o", "json", "--timeout", "9s", "-b", "h:1"])
    assert result.exit_code == 1, result.output
    assert seen == {"name": "zz", "count": 5, "output": "json", "timeout": "9s", "bootstrap": "h:1"}
