"""One question, one answer: ``hanging``, ``check``, ``lso``, ``diagnose`` and the exporter, run on
one cluster at one moment, agree on how many transactions are open, which hang, and how old each is.

They used to gather and decide each their own way: ``check`` counted the coordinators' open
transactions across the whole cluster while ``hanging`` counted those on the partitions it scanned,
and ``diagnose`` dated a transaction from a coordinator that no longer tracked it on that partition
while ``lso`` did not. Every command now asks :mod:`kafkatxn.verdicts` (over the real facade, on
the shared fake cluster).
"""

from __future__ import annotations

import json
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kafkatxn.exporter import ExportOptions, render_text
from kafkatxn.cli.common import CommandContext
from kafkatxn.model import ProducerState, TopicPartition, TransactionDescription
from kafkatxn.snapshot import gather_snapshot
from tests.support.cli_helpers import run_cli
from tests.support.fake_kafka import FakeCluster, KafkaModel

MAX = 900_000
ORDERS0, ORDERS1, ORDERS2 = (TopicPartition("orders", p) for p in range(3))
PAYMENTS = TopicPartition("payments", 0)
TOLERANCE_MS = 5_000  # each command reads the clock when it gathers


def build() -> tuple[KafkaModel, int]:
    now = int(time.time() * 1000)
    m = KafkaModel(brokers=(1, 2, 3))
    m.add_transaction_log([1, 2, 3])
    m.add_partition("orders", 0, leader=1, lso=10, hw=20)
    m.add_partition("orders", 1, leader=2, lso=4, hw=9)
    m.add_partition("orders", 2, leader=3, lso=6, hw=8)
    m.add_partition("payments", 0, leader=3, lso=5, hw=9)
    started = now - 3 * MAX
    # orders-0: tracked by app-a, idle past the max timeout: long-running, pinning group g.
    m.producers[ORDERS0] = [ProducerState(7, 0, 3, now - 2 * MAX, 1, 10)]
    m.transactions["app-a"] = TransactionDescription("app-a", 1, "Ongoing", 7, 0, MAX, started, frozenset([ORDERS0]))
    # orders-1: no coordinator knows producer 8: hanging.
    m.producers[ORDERS1] = [ProducerState(8, 0, 3, now - 2 * MAX, 1, 4)]
    # orders-2: app-d's coordinator has producer 12's transaction open, but not on orders-2: hanging
    # there, and its start time is not this partition's.
    m.producers[ORDERS2] = [ProducerState(12, 0, 3, now - 2 * MAX, 1, 6)]
    m.transactions["app-d"] = TransactionDescription("app-d", 2, "Ongoing", 12, 0, MAX, now - 4 * MAX, frozenset([ORDERS0]))
    # payments-0 and a transaction that has written nowhere yet: open at their coordinators, outside ^orders$.
    m.producers[PAYMENTS] = [ProducerState(9, 0, 3, now - 1_000, 1, 5)]
    m.transactions["app-b"] = TransactionDescription("app-b", 3, "Ongoing", 9, 0, MAX, now - 1_000, frozenset([PAYMENTS]))
    m.transactions["app-c"] = TransactionDescription("app-c", 2, "Ongoing", 11, 0, MAX, now - 2_000, frozenset())
    m.groups["g"] = {ORDERS0: 10}
    m.groups["h"] = {ORDERS2: 6}
    return m, started


@pytest.fixture
def cluster(monkeypatch):
    model, started = build()
    fake = FakeCluster(model)
    monkeypatch.setattr(CommandContext, "cluster", property(lambda self: fake))
    return fake, started


def cli(capsys, *args: str) -> dict | list:
    timeout = [] if args[0] == "lso" else ["--max-transaction-timeout", "15m"]
    result = run_cli(capsys, *args, *timeout, "-b", "fake:9092", "-o", "json")
    assert result.code in (0, 1, 2), result.stderr
    return json.loads(result.stdout)


def close(a: int | None, b: int | None) -> bool:
    return a is not None and b is not None and abs(a - b) <= TOLERANCE_MS


def test_every_command_counts_the_same_open_transactions_and_the_same_hanging_one(capsys, cluster):
    found = cli(capsys, "hanging", "-t", "orders")
    checked = cli(capsys, "check", "--topic-regex", "^orders$", "--txn-age-warn", "none", "--txn-age-crit", "none")
    assert found["open_transactions"] == 3  # producers 7, 8 and 12, one on each orders partition
    assert checked["open_transactions"] == found["open_transactions"], (checked, found)
    assert checked["hanging_transactions"] == found["hanging_count"] == 2


def test_every_command_gives_one_transaction_the_same_age(capsys, cluster):
    fake, started = cluster
    expected = int(time.time() * 1000) - started
    lags = {(r["topic"], r["partition"]): r for r in cli(capsys, "lso", "-t", "orders")}
    found = cli(capsys, "hanging", "-t", "orders")
    diagnosed = cli(capsys, "diagnose", "--group", "g")
    (long_running,) = found["long_running"]
    (pinning,) = diagnosed["transactions"]
    ages = {
        "lso": lags[("orders", 0)]["txn_age_ms"],
        "hanging": long_running["transaction_age_ms"],
        "diagnose": pinning["age_ms"],
    }
    assert all(close(age, expected) for age in ages.values()), (expected, ages)
    # The hanging ones have no start on their partition: no command dates them from somewhere else.
    assert lags[("orders", 1)]["txn_age_ms"] is None and lags[("orders", 2)]["txn_age_ms"] is None
    (not_here,) = cli(capsys, "diagnose", "--group", "h")["transactions"]
    assert not_here["producer_id"] == 12 and not_here["age_ms"] is None, not_here


def test_the_exporter_counts_and_dates_what_the_commands_do(capsys, cluster):
    fake, started = cluster
    found = cli(capsys, "hanging", "-t", "orders")
    snapshot = gather_snapshot(fake, topic_regex="^orders$", max_transaction_timeout_ms=MAX)
    metrics = {s.name: s.value for f in text_string_to_metric_families(render_text(snapshot, ExportOptions()).decode())
               for s in f.samples}
    assert snapshot.open_transaction_count == found["open_transactions"]
    assert metrics["kafkatxn_hanging_transactions"] == found["hanging_count"] == 2
    # The oldest transaction a coordinator has open on the chosen topics is app-d (on orders-0 by its
    # coordinator's account): check says so too, from its own gather.
    checked = cli(capsys, "check", "--topic-regex", "^orders$", "--txn-age-warn", "none", "--txn-age-crit", "none")
    oldest_ms = int(metrics["kafkatxn_transaction_oldest_age_seconds"] * 1000)
    assert close(oldest_ms, checked["transaction_age_max_ms"]) and oldest_ms > 4 * MAX - TOLERANCE_MS, (oldest_ms, checked)
