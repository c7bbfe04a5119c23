"""``kafkatxn completion SHELL``: the shell completion script (also kept in completions/)."""

from __future__ import annotations

import enum

import typer


class Shell(str, enum.Enum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"


def completion_script(shell: str) -> str:
    # typer answers completion requests itself when _KAFKATXN_COMPLETE is set; the script only asks.
    from typer._completion_shared import get_completion_script

    return get_completion_script(prog_name="kafkatxn", complete_var="_KAFKATXN_COMPLETE", shell=shell).rstrip() + "\n"


def register(app: typer.Typer) -> None:
    # add_completion=False drops typer's --install-completion flags, and with them this set-up.
    from typer._completion_classes import completion_init

    completion_init()

    @app.command("completion")
    def completion(shell: Shell = typer.Argument(..., help="bash, zsh or fish")) -> None:
        """Print the completion script, e.g. `kafkatxn completion bash > /etc/bash_completion.d/kafkatxn`."""
        print(completion_script(shell.value), end="")
