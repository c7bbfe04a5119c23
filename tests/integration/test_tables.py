"""A table from every command fits 120 columns without --wide, on the demo's data (the demo's broker:
verification off, so a genuinely hanging transaction exists next to the inspect scenario), and
--wide adds the rest."""

from __future__ import annotations

import time

import pytest

from harness.hanging_maker import make_hanging_transaction
from harness.scenarios import inspect_scenario, unique
from kafkatxn.model import TopicPartition
from tests.support.cli_helpers import run_cli
from tests.support.groups import commit_offset

pytestmark = pytest.mark.integration

WIDTH = 120


def test_every_commands_table_fits_120_columns(capsys, kafka_factory, tmp_path, figures):
    cluster = kafka_factory(1, {"transaction.partition.verification.enable": "false"})
    bootstrap = cluster.bootstrap_servers
    scenario = inspect_scenario(bootstrap, prefix="tables-demo")
    topic = scenario.topic
    try:
        hanging = make_hanging_transaction(bootstrap, unique("tables-zombie"), topic, partition=0, transaction_timeout_ms=10_000)
        group = unique("tables-billing")
        commit_offset(bootstrap, group, TopicPartition(topic, 3), scenario.open.start_offset(TopicPartition(topic, 3)))
        time.sleep(2.5)
        bound = ("--max-transaction-timeout", "2s")  # both open transactions are checked with their coordinator
        audit = ("--audit-log", str(tmp_path / "audit.jsonl"))
        commands = [
            ("cluster",),
            ("producers", "--topic", topic),
            ("producers", "--summary"),
            ("transactions", "list"),
            ("transactions", "list", "--describe"),
            ("transactions", "describe", scenario.open.transactional_id, scenario.committed.transactional_id),
            ("lso",),
            ("lso", "--groups", group),
            ("hanging", *bound),
            ("abort", "--max-transaction-timeout", "0s", "--topic", topic, "--partition", "0", "--start-offset", str(hanging.start_offset), "--dry-run", *audit),
            ("fence", scenario.open.transactional_id, "--dry-run", *audit),
            ("diagnose", "--group", group, *bound),
            ("config", "show"),
        ]
        for args in commands:
            result = run_cli(capsys, *args, "--bootstrap-server", bootstrap, "--timeout", "20s")
            assert result.code in (0, 1, 2), (args, result.code, result.stderr)
            lines = result.stdout.splitlines()
            assert lines, args
            widest = max(len(line) for line in lines)
            assert widest <= WIDTH, (args, [line for line in lines if len(line) > WIDTH])
            figures.setdefault("tables within 120 columns (commands)", 0)
            figures["tables within 120 columns (commands)"] += 1

        narrow = run_cli(capsys, "producers", "--topic", topic, "--bootstrap-server", bootstrap)
        wide = run_cli(capsys, "producers", "--topic", topic, "--bootstrap-server", bootstrap, "--wide")
        narrow_header, wide_header = narrow.stdout.splitlines()[0].split(), wide.stdout.splitlines()[0].split()
        assert set(narrow_header) < set(wide_header) and "last_sequence" in wide_header
        assert {"topic", "partition", "producer_id", "transactional_id", "age"} <= set(narrow_header)
    finally:
        scenario.close()
