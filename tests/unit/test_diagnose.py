"""`kafkatxn diagnose` over the shared fake cluster (the real facade over an in-memory model)."""

from __future__ import annotations

import json

import pytest

from kafkatxn import diagnose, facts_lso
from kafkatxn.cli.common import CommandContext
from kafkatxn.gaps import Gap
from kafkatxn.diagnose_rows import Action, TxnVerdict
from kafkatxn.verdicts_groups import GroupVerdict
from kafkatxn.model import ProducerState, TransactionDescription
from tests.support.blocked_group import AUDIT, ORDERS, blocked_model, now_ms
from tests.support.cli_helpers import run_cli

MAX = 900_000


def test_held_within_its_timeout_waits_and_offers_fence_caught_up_group_has_phantom_lag():
    """A transaction in flight (tracked, within its timeout): the group waits on it, exit 0 (it was
    "blocked", exit 1: a healthy pipeline sits there between commits)."""
    model, cluster = blocked_model()
    d = diagnose.run(cluster, ["billing", "reports"])
    by_group = {g.group: g for g in d.groups}
    assert by_group["billing"].status == "waiting" and by_group["billing"].pinned_by == ("billing-tx",)
    assert by_group["reports"].status == "caught_up"
    assert (by_group["reports"].lag_messages, by_group["reports"].lag_to_hw_messages, by_group["reports"].phantom_messages) == (0, 3, 3)

    rows = {p.group: p for p in d.partitions}
    assert rows["billing"].gap is Gap.waiting and rows["billing"].transactional_id == "billing-tx"
    assert "waiting at LSO 3 for billing-tx" in rows["billing"].explanation
    assert (rows["billing"].committed_offset, rows["billing"].last_stable_offset, rows["billing"].high_watermark) == (3, 3, 7)
    assert rows["reports"].gap is Gap.phantom and "markers" in rows["reports"].explanation

    (t,) = d.transactions
    assert (t.producer_id, t.producer_epoch, t.transactional_id, t.coordinator_state) == (5000, 3, "billing-tx", "Ongoing")
    assert t.verdict is TxnVerdict.tracked and t.action is Action.wait
    assert t.aborts_at_ms == model.transactions["billing-tx"].start_time_ms + 600_000 == t.until_ms
    assert t.release_command == "kafkatxn fence billing-tx"
    assert t.groups == ("billing",) and t.partitions == ("orders-0@3",)
    assert 30_000 <= t.age_ms < 60_000 and t.transaction_timeout_ms == 600_000
    assert d.exit_code == 0


def test_the_suggested_fence_unblocks_the_group():
    model, cluster = blocked_model()
    (t,) = diagnose.run(cluster, ["billing"]).transactions
    tid = t.release_command.split()[-1]
    cluster.fence_transactional_id(tid, 60_000)  # what `kafkatxn fence` does, on the fake
    after = diagnose.run(cluster, ["billing"])
    assert after.transactions == [] and after.groups[0].status == "lagging"  # the committed records beyond are readable
    assert after.exit_code == 0  # 4 offsets: below --lag-threshold
    assert diagnose.run(cluster, ["billing"], lag_threshold=4).exit_code == 1
    model.groups["billing"][ORDERS] = model.offsets[ORDERS][1]
    assert diagnose.run(cluster, ["billing"]).exit_code == 0


def test_caught_up_group_alone_exits_0():
    _, cluster = blocked_model()
    d = diagnose.run(cluster, ["reports"])
    assert d.exit_code == 0 and d.transactions == []


def test_past_its_own_timeout_is_overdue_fence_exit_2():
    _, cluster = blocked_model(started_ago_ms=700_000, timeout_ms=600_000)
    d = diagnose.run(cluster, ["billing"])
    (t,) = d.transactions
    assert t.verdict is TxnVerdict.long_running and t.action is Action.fence
    assert t.command == "kafkatxn fence billing-tx" and "past its own timeout" in t.reason
    assert d.exit_code == 2


def test_idle_past_the_max_timeout_but_tracked_is_long_running():
    _, cluster = blocked_model(idle_ms=MAX + 5_000, started_ago_ms=MAX + 6_000, timeout_ms=MAX * 2)
    (t,) = diagnose.run(cluster, ["billing"]).transactions
    assert t.verdict is TxnVerdict.long_running and t.action is Action.fence


def test_hanging_suggests_abort_with_the_partition_and_start_offset():
    model, cluster = blocked_model(idle_ms=MAX + 1_000, tracked=False)
    d = diagnose.run(cluster, ["billing"])
    (t,) = d.transactions
    assert t.verdict is TxnVerdict.hanging and t.transactional_id is None
    assert t.command == "kafkatxn abort --topic orders --partition 0 --start-offset 3"
    # No coordinator dates it: its age is its first record's (here as old as its last write).
    assert t.age_source == "first_record" and t.age_ms >= MAX + 1_000 and t.aborts_at_ms is None
    assert d.exit_code == 2
    model.close_transaction(ORDERS, 5000)  # what the marker does
    assert diagnose.run(cluster, ["billing"]).transactions == []


def test_an_untracked_pin_before_its_deadline_is_untracked_and_abort_is_offered_for_then():
    """Not tracked (no coordinator lists its producer id), written 10 s ago: not hanging yet by
    hanging's rule, but never calm either: untracked, hanging from its deadline (the maximum here:
    no coordinator reports its own timeout) unless it ends; abort from then, or now on purpose.
    A fence is never offered: no coordinator tracks it."""
    model, cluster = blocked_model(idle_ms=10_000, tracked=False)
    d = diagnose.run(cluster, ["billing"])
    (t,) = d.transactions
    assert t.verdict is TxnVerdict.untracked and t.action is Action.abort
    assert t.command == "kafkatxn abort --topic orders --partition 0 --start-offset 3"
    assert t.release_command == t.command + " --max-transaction-timeout 0"
    assert "hanging from" in t.reason and "maximum transaction timeout" in t.reason
    assert "fence" not in f"{t.command} {t.release_command} {t.risk} {t.release_risk}"
    (producer,) = model.producers[ORDERS]
    assert t.until_ms == producer.last_timestamp_ms + MAX + 1
    assert d.exit_code == 1  # a group blocked within the timeouts


def test_a_recent_pin_whose_coordinator_is_gone_is_recent_and_says_why():
    """Within transaction.max.timeout.ms nothing is hanging, whatever its coordinator could say: the
    verdict is determined (``lso --groups`` exits 1 here too), and the reason names what did not answer."""
    model, cluster = blocked_model(idle_ms=10_000, coordinator=2)
    model.stop_broker(2)
    d = diagnose.run(cluster, ["billing"])
    (t,) = d.transactions
    assert t.verdict is TxnVerdict.recent and t.action is Action.wait
    assert "__transaction_state-1" in t.reason and "not hanging by hanging's rule" in t.reason
    assert d.exit_code == 1


def test_coordinator_unavailable_cannot_decide_and_says_why():
    model, cluster = blocked_model(idle_ms=MAX + 1_000, coordinator=2)
    model.stop_broker(2)  # gone from metadata: __transaction_state-1 has no leader, nobody answers for its ids
    d = diagnose.run(cluster, ["billing"])
    (t,) = d.transactions
    assert t.verdict is TxnVerdict.undetermined and t.action is Action.undecided
    assert t.command.startswith("cannot decide: ")
    assert "__transaction_state-1" in t.command
    # Undetermined, and its first record is past the critical age: the group is stuck whoever owns it.
    assert t.age_source == "first_record" and t.age_ms >= diagnose.CRITICAL_AGE_MS and d.exit_code == 2
    # Below the critical age the verdict alone decides: undetermined, exit 3.
    assert diagnose.diagnose(facts_lso.take_held_group_snapshot(cluster, ["billing"]), critical_age_ms=None).exit_code == 3


def test_coordinator_not_answering_cannot_decide():
    model, cluster = blocked_model(idle_ms=MAX + 1_000, coordinator=2)
    model.down.add(2)  # still in the metadata (not yet fenced), but its requests time out
    (t,) = diagnose.run(cluster, ["billing"]).transactions
    assert t.verdict is TxnVerdict.undetermined and "__transaction_state-1" in t.command


def test_blast_radius_names_every_group_and_partition_of_the_transaction():
    model, cluster = blocked_model()
    other = model.add_partition("orders", 1, leader=2, lso=10, hw=12)
    now = now_ms()
    model.producers[other] = [ProducerState(5000, 3, 1, now - 1000, -1, 10)]
    d0 = model.transactions["billing-tx"]
    model.transactions["billing-tx"] = TransactionDescription(
        d0.transactional_id, d0.coordinator_id, d0.state, d0.producer_id, d0.producer_epoch, d0.timeout_ms,
        d0.start_time_ms, frozenset({ORDERS, other}),
    )
    model.groups["shipping"] = {other: 10}
    d = diagnose.run(cluster)
    (t,) = d.transactions
    assert t.groups == ("billing", "shipping") and t.partitions == ("orders-0@3", "orders-1@10")
    assert t.lso_lag_messages == 4 + 2


def test_read_committed_lag():
    _, cluster = blocked_model()
    model = cluster.model
    model.groups["fresh"] = {AUDIT: 0}
    rows = {p.group: p for p in diagnose.run(cluster).partitions}
    assert rows["fresh"].verdict is GroupVerdict.lagging and rows["fresh"].lag_messages == 10
    assert rows["billing"].lag_messages == 0 and rows["reports"].lag_messages == 0


@pytest.fixture
def fake_cli(monkeypatch):
    model, cluster = blocked_model()
    monkeypatch.setattr(CommandContext, "cluster", property(lambda self: cluster))
    return model, cluster


def test_cli_json_structure_and_exit_code(capsys, fake_cli):
    result = run_cli(capsys, "diagnose", "-b", "fake:9092", "--group", "billing", "--group", "reports", "-o", "json")
    assert result.code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert set(doc) >= {"summary", "exit_code", "groups", "partitions", "transactions"}
    (t,) = doc["transactions"]
    assert t["verdict"] == "tracked" and t["action"] == "wait" and t["release_command"] == "kafkatxn fence billing-tx"
    assert {"age_ms", "aborts_at_ms", "transaction_timeout_ms", "risk", "groups", "partitions"} <= set(t)


def test_cli_table_names_the_transaction_and_the_commands(capsys, fake_cli):
    result = run_cli(capsys, "diagnose", "-b", "fake:9092")
    assert result.code == 0, result.stderr
    assert "TRANSACTION billing-tx" in result.stdout
    assert "$ kafkatxn fence billing-tx" in result.stdout and "markers" in result.stdout
    assert max(len(line) for line in result.stdout.splitlines()) <= 120


def test_a_max_transaction_timeout_of_zero_is_zero_not_the_brokers():
    """--max-transaction-timeout 0s: every idle open transaction is checked with its coordinator now
    (as hanging takes it); it used to read as "not given", and the brokers' 15 minutes applied."""
    _, cluster = blocked_model(idle_ms=2_000, tracked=False)
    d = diagnose.run(cluster, ["billing"], max_transaction_timeout_ms=0)
    (t,) = d.transactions
    assert d.max_transaction_timeout_ms == 0
    assert t.verdict is TxnVerdict.hanging and "--max-transaction-timeout 0" in t.command
    waits = diagnose.run(cluster, ["billing"])  # the brokers' maximum: idle 2 s is not hanging yet
    assert waits.max_transaction_timeout_ms == MAX and waits.transactions[0].verdict is not TxnVerdict.hanging
