"""The connection and output options work before the command (as Kafka's tools take them) and after it."""

from __future__ import annotations

import pytest

from kafkatxn.cli import app as app_module
from kafkatxn.cli.common import CommandContext
from kafkatxn.errors import ClusterError
from tests.support.cli_helpers import run_cli

# Each command that talks to a cluster, with the arguments it needs to get that far.
COMMANDS = {
    ("cluster",): [],
    ("producers",): [],
    ("transactions", "list"): [],
    ("transactions", "describe"): ["some-id"],
    ("transactions", "history"): ["some-id"],
    ("lso",): [],
    ("hanging",): [],
    ("diagnose",): [],
    ("abort",): ["--all-hanging", "--dry-run"],
    ("fence",): ["some-id", "--dry-run"],
    ("restore-commit",): ["-t", "orders", "-p", "0", "--start-offset", "10", "--dry-run"],
    ("check",): [],
    ("exporter",): ["--listen", "127.0.0.1:0"],
    ("audit",): [],
}


class SeenContext(ClusterError):
    pass


@pytest.fixture
def seen(monkeypatch):
    """Instead of connecting, every command ends with the settings it would connect with."""

    def cluster(self: CommandContext):
        raise SeenContext(f"bootstrap={self.bootstrap_server} output={self.output} timeout={self.timeout} "
                          f"properties={','.join(self.properties)} no_headers={self.no_headers}")

    monkeypatch.setattr(CommandContext, "cluster", property(cluster))
    monkeypatch.setattr(CommandContext, "config", property(cluster))


def test_the_table_names_every_command_that_talks_to_a_cluster():
    leaves = set(app_module.leaf_commands())
    offline = {("config", "show"), ("completion",)}
    assert leaves - offline == set(COMMANDS), "add the new command to COMMANDS"


@pytest.mark.parametrize("path", sorted(COMMANDS), ids=" ".join)
def test_shared_options_before_and_after_the_command(capsys, seen, path):
    shared = ["--bootstrap-server", "b1:9092", "-o", "json", "--timeout", "7s", "-X", "client.id=x", "--no-headers"]
    expected = "bootstrap=b1:9092 output=json timeout=7s properties=client.id=x no_headers=True"
    before = run_cli(capsys, *shared, *path, *COMMANDS[path])
    after = run_cli(capsys, *path, *COMMANDS[path], *shared)
    for result in (before, after):
        assert result.code == 3, result.stderr
        assert expected in result.stderr


def test_after_the_command_wins_and_properties_add_up(capsys, seen):
    result = run_cli(capsys, "-b", "root:1", "-X", "client.id=a", "-o", "csv", "lso", "-b", "cmd:2", "-X", "client.rack=r")
    assert "bootstrap=cmd:2 output=csv" in result.stderr
    assert "properties=client.id=a,client.rack=r" in result.stderr


def test_options_before_the_command_are_usage_checked_too(capsys):
    result = run_cli(capsys, "-o", "yaml", "lso")
    assert result.code == 64 and "yaml" in result.stderr
