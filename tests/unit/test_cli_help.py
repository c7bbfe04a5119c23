"""Each command's --help: its examples (which parse), and the shared options named once."""

from __future__ import annotations

import shlex

import pytest

from kafkatxn.cli import app as app_mod
from kafkatxn.cli.helptext import EXAMPLES
from tests.support.cli_helpers import run_cli

LEAVES = app_mod.leaf_commands()
RUNNABLE = [path for path in LEAVES if path != ("completion",)]


@pytest.mark.parametrize("path", RUNNABLE, ids=" ".join)
def test_help_has_two_or_three_examples_and_the_shared_options_once(capsys, path):
    result = run_cli(capsys, *path, "--help")
    assert result.code == 0
    text = result.stdout
    examples = text.split("Examples:\n", 1)[1].splitlines()
    assert 2 <= len([line for line in examples if line.strip().startswith("kafkatxn ")]) <= 3, text
    assert "--bootstrap-server" not in text and "KAFKATXN_OUTPUT" not in text  # listed in full only at the root
    assert text.count("Connection and output options") == 1 and "kafkatxn --help" in text


def test_the_root_help_lists_the_shared_options_in_full(capsys):
    text = run_cli(capsys, "--help").stdout
    assert "--bootstrap-server" in text and "--no-headers" in text and "--wide" in text


@pytest.mark.parametrize("key", sorted(EXAMPLES))
def test_every_example_parses_and_fits_80_columns(capsys, key):
    for line in EXAMPLES[key]:
        assert len(line) + 2 <= 80, line
        args = shlex.split(line.split(" > ")[0])[1:]
        # --help is acted on after every option is parsed: an unknown option or command fails first.
        result = run_cli(capsys, *args, "--help")
        assert result.code == 0 and f"Usage: kafkatxn {key}" in result.stdout, (line, result.stderr)
