"""The command docs say only what the CLI does: docs/cli.md is its help, regenerated, and every option
docs/commands.md names under a command is one that command (or every command) takes."""

from __future__ import annotations

import re
from pathlib import Path

from kafkatxn.cli.app import leaf_commands
from kafkatxn.cli.reference import cli_reference

ROOT = Path(__file__).resolve().parents[2]


def test_the_cli_reference_is_current():
    committed = (ROOT / "docs" / "cli.md").read_text()
    assert committed == cli_reference(), "run scripts/gen-cli-reference to refresh docs/cli.md"


def _options(command) -> set[str]:
    return {opt for param in command.params if param.param_type_name == "option" for opt in param.opts}


def _sections(text: str) -> list[tuple[str, str]]:
    """(heading, body) of each `## ` section."""
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return list(zip(parts[1::2], parts[2::2]))


def _command_of(span: str, commands) -> tuple[str, ...] | None:
    """The command a code span runs (`kafkatxn abort --topic T`, `check --lso-lag-warn`), if it names one."""
    words = span.split()
    if words[:1] == ["kafkatxn"]:
        words = words[1:]
    for length in (2, 1):
        if tuple(words[:length]) in commands:
            return tuple(words[:length])
    return None


OPTION = re.compile(r"(?<![\w-])(--[A-Za-z][A-Za-z0-9-]*)")


def test_every_option_commands_md_names_exists_on_its_command():
    commands = leaf_commands()
    shared = _options(commands[("lso",)]) & _options(commands[("cluster",)])  # the options every command takes
    text = (ROOT / "docs" / "commands.md").read_text()
    stale = []
    for heading, body in _sections(text):
        named = {path for path in commands if f"kafkatxn {' '.join(path)}" in heading
                 or (len(path) == 2 and f"kafkatxn {path[0]}" in heading and path[1] in heading)}
        assert named, f"docs/commands.md section {heading!r} names no command"
        section_options = shared.union(*(_options(commands[path]) for path in named))
        # A code span or an example's command line (`$ kafkatxn …`) is checked against the command it
        # runs; the rest of the section against the section's commands. Examples' output is not read.
        examples = re.findall(r"^```\n(.*?)^```$", body, flags=re.M | re.S)
        body = re.sub(r"^```\n.*?^```$", "", body, flags=re.M | re.S)
        command_lines = [line.rsplit("$ ", 1)[1] for block in examples for line in block.splitlines() if "$ " in line]
        for span in re.findall(r"`([^`]+)`", body) + command_lines:
            command = _command_of(span, commands)
            known = shared | _options(commands[command]) if command else section_options
            stale += [f"{heading}: {option} in `{span}`" for option in OPTION.findall(span) if option not in known]
        prose = re.sub(r"`[^`]+`", "", body)
        stale += [f"{heading}: {option}" for option in OPTION.findall(prose) if option not in section_options]
    assert not stale, "docs/commands.md names options its commands do not take:\n" + "\n".join(stale)


def test_every_command_is_in_the_reference():
    reference = (ROOT / "docs" / "cli.md").read_text()
    missing = [" ".join(path) for path in leaf_commands() if f"## `kafkatxn {' '.join(path)}`" not in reference]
    assert not missing, missing
