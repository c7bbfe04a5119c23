"""Groups whose members are assigned partitions they never committed an offset on (issue 24, 4)."""

from __future__ import annotations

import json

import pytest

from kafkatxn import diagnose, lso, verdicts_groups
from kafkatxn.gaps import Gap
from kafkatxn.diagnose_rows import TxnVerdict
from kafkatxn.model import ProducerState, TopicPartition
from kafkatxn.facts_cluster import gather_snapshot
from kafkatxn import check
from kafkatxn.cli.common import CommandContext
from kafkatxn.verdicts_groups import GroupVerdict
from tests.support.blocked_group import now_ms
from tests.support.cli_helpers import run_cli
from tests.support.fake_kafka import FakeCluster, KafkaModel

O0 = TopicPartition("orders", 0)
O1 = TopicPartition("orders", 1)
MAX = 900_000


@pytest.mark.parametrize(
    "log_start, lso_, hw, expected",
    [
        (0, 0, 5, GroupVerdict.blocked),  # both earliest (0) and latest (LSO 0) start at the pin
        (5, 5, 9, GroupVerdict.blocked),  # records deleted up to the pin: the same
        (7, 7, 7, GroupVerdict.caught_up),  # nothing to read from either start
        (0, 3, 5, GroupVerdict.unknown),  # earliest reads 0..2 first, latest waits at 3
        (0, 3, 3, GroupVerdict.unknown),  # earliest has records, latest has none
        (None, 0, 5, GroupVerdict.unknown),  # the log start did not arrive
    ],
)
def test_uncommitted_verdict(log_start, lso_, hw, expected):
    assert verdicts_groups.uncommitted_verdict(log_start, lso_, hw) is expected


def hanging_model(log_start: int = 0, lso_: int = 0, committed: dict | None = None) -> tuple[KafkaModel, FakeCluster]:
    """ledger's one member is assigned orders-0 and orders-1; a producer no coordinator tracks has
    an open transaction at orders-0's LSO, idle past the max timeout: hanging."""
    model = KafkaModel(brokers=(1,))
    model.add_transaction_log([1])
    model.add_partition("orders", 0, leader=1, lso=lso_, hw=lso_ + 4)
    model.add_partition("orders", 1, leader=1, lso=0, hw=0)
    model.producers[O0] = [ProducerState(7000, 0, lso_, now_ms() - MAX - 60_000, -1, lso_)]
    model.log_starts = {O0: log_start, O1: 0}
    model.assignments = {"ledger": {O0, O1}}
    if committed is not None:
        model.groups = {"ledger": committed}
    return model, FakeCluster(model)


def test_lso_groups_shows_a_group_that_never_committed():
    _, cluster = hanging_model()
    report = lso.group_report(cluster, ["ledger"])
    rows = {(r.topic, r.partition): r for r in report.rows}
    assert set(rows) == {("orders", 0), ("orders", 1)}
    stuck, empty = rows[("orders", 0)], rows[("orders", 1)]
    assert stuck.committed_offset is None and stuck.verdict is GroupVerdict.blocked
    assert stuck.producer_id == 7000 and stuck.lag_to_hw_messages == 4 and stuck.lag_to_lso_messages == 0
    assert empty.committed_offset is None and empty.verdict is GroupVerdict.caught_up
    assert report.exit_code == 2  # the pin is older than the critical age


def test_log_start_below_the_lso_is_unknown_and_said_plainly():
    _, cluster = hanging_model(log_start=0, lso_=3)
    (row,) = [r for r in lso.group_report(cluster, ["ledger"]).rows if r.partition == 0]
    assert row.verdict is GroupVerdict.unknown and row.committed_offset is None
    assert row.lag_to_lso_messages == 3 and row.producer_id is None  # measured from the log start (earliest)
    d = diagnose.run(cluster, ["ledger"])
    (p,) = [p for p in d.partitions if p.partition == 0]
    assert p.gap is Gap.unknown
    assert "depends on their auto.offset.reset" in p.explanation and "latest waits at LSO 3" in p.explanation
    assert d.groups[0].status == "unknown" and d.exit_code == 1
    assert d.summary == "1 group: 1 unknown"


def test_a_committed_partition_keeps_its_commit_and_only_the_rest_is_uncommitted():
    model, cluster = hanging_model(committed={O1: 0})
    rows = {r.partition: r for r in lso.group_report(cluster, ["ledger"]).rows}
    assert rows[1].committed_offset == 0 and rows[0].committed_offset is None
    # Only the uncommitted partition's log start is asked.
    assert cluster.called("log_start_offsets") == [("log_start_offsets", (O0,))]


def test_no_assignment_asks_no_log_start():
    model = KafkaModel(brokers=(1,))
    model.add_partition("orders", 0, leader=1, lso=2, hw=2)
    model.groups = {"billing": {O0: 2}}
    cluster = FakeCluster(model)
    lso.group_report(cluster, ["billing"])
    assert cluster.called("log_start_offsets") == []


def test_diagnose_explains_a_group_stuck_behind_the_lso_without_commits():
    _, cluster = hanging_model()
    d = diagnose.run(cluster, ["ledger"])
    (t,) = d.transactions
    assert t.verdict is TxnVerdict.hanging and t.groups == ("ledger",)
    assert t.command == "kafkatxn abort --topic orders --partition 0 --start-offset 0"
    (p,) = [p for p in d.partitions if p.partition == 0]
    assert p.gap is Gap.blocked and p.committed_offset is None
    assert p.explanation.startswith(
        "ledger has no committed offsets on orders-0; its consumers start at earliest or latest, both at or behind LSO 0, pinned by producer 7000"
    )
    assert d.groups[0].status == "blocked" and d.exit_code == 2
    assert "no committed offsets to diagnose" not in d.summary


def test_check_and_the_exporter_count_the_uncommitted_group_blocked():
    _, cluster = hanging_model()
    snap = gather_snapshot(cluster, max_transaction_timeout_ms=MAX, groups=True)
    (blocked,) = [g for g in snap.groups if g.blocked]
    assert (blocked.group, blocked.topic, blocked.partition) == ("ledger", "orders", 0)
    assert check.evaluate(snap).exit_code == 2


def test_cli_lso_groups_json_says_none_committed(capsys, monkeypatch):
    _, cluster = hanging_model()
    monkeypatch.setattr(CommandContext, "cluster", property(lambda self: cluster))
    result = run_cli(capsys, "lso", "-b", "fake:9092", "--groups", "ledger", "-o", "json")
    assert result.code == 2, result.stderr
    rows = json.loads(result.stdout)
    assert {(r["partition"], r["committed_offset"], r["verdict"]) for r in rows} == {(0, None, "blocked"), (1, None, "caught_up")}
