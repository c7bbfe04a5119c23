"""``transactions history`` and diagnose's history line over the shared fake cluster (the real facade
over an in-memory model whose ``__transaction_state`` partitions hold coordinator records)."""

from __future__ import annotations

import dataclasses
import json

from kafkatxn import diagnose, facts_history
from kafkatxn.verdicts import coordinator_partition
from kafkatxn.txnlog_records import KIND_UNKNOWN_VERSION, TxnLogRecord, UndecodedRecord
from tests.support.blocked_group import blocked_model, now_ms
from tests.support.cli_helpers import run_cli
from tests.support.coordinator import MIN, S, Coordinator
from tests.support.fake_kafka import FakeCluster, KafkaModel

TID = "billing-tx"


def log_of(model: KafkaModel, c: Coordinator, *extra) -> int:
    """Put ``c``'s records (and ``extra``) on the log partitions the coordinator picks; TID's partition."""
    n = sum(1 for tp in model.partitions if tp.topic == "__transaction_state")
    for r in [*c.records, *extra]:
        p = coordinator_partition(r.transactional_id, n) if isinstance(r, TxnLogRecord) else r.log_partition
        model.transaction_log.setdefault(p, []).append(r)
    return coordinator_partition(TID, n)


def records(c: Coordinator) -> list[TxnLogRecord]:
    return [TxnLogRecord(*r[:16]) for r in c.records]


def shared_id(c: Coordinator, t0: int) -> None:
    for i in range(4):  # two instances taking turns, each init fencing the other's open transaction
        t = t0 + i * MIN
        c.init(TID, t)
        c.txn(TID, t + S)
        c.add(TID, t + 2 * S)
    c.init("other-tx", t0)
    c.txn("other-tx", t0 + S)


def fake(monkeypatch, model: KafkaModel) -> FakeCluster:
    cluster = FakeCluster(model)
    monkeypatch.setattr("kafkatxn.kafka.Cluster", lambda config: cluster)
    return cluster


def test_history_reads_only_the_partition_that_owns_the_id(capsys, monkeypatch):
    model = KafkaModel(brokers=(1, 2))
    model.add_transaction_log([1, 2, 1, 2, 1])
    c = Coordinator(tv=0)
    shared_id(c, now_ms() - 10 * MIN)
    c.records[:] = records(c)
    owner = log_of(model, c)
    cluster = fake(monkeypatch, model)
    done = run_cli(capsys, "transactions", "history", TID, "-b", "fake:9092", "-o", "json")
    assert done.code == 0, done.stderr
    rows = json.loads(done.stdout)
    assert {r["transactional_id"] for r in rows} == {TID}
    assert [e for r in rows for e in r["events"]].count("fenced_open_transaction") == 3
    assert cluster.called("read_log_partition") == [("read_log_partition", owner)]


def test_a_denied_log_is_one_line_naming_the_acl_and_exit_3(capsys, monkeypatch):
    model = KafkaModel(brokers=(1,))
    model.add_transaction_log([1, 1, 1])
    model.transaction_log_error = "TOPIC_AUTHORIZATION_FAILED"
    fake(monkeypatch, model)
    done = run_cli(capsys, "transactions", "history", TID, "-b", "fake:9092")
    assert done.code == 3
    assert done.stderr.splitlines() == [
        "kafkatxn: incomplete transaction log: __transaction_state-"
        f"{coordinator_partition(TID, 3)}: not authorized: needs READ on Topic __transaction_state"
    ]


def test_an_unknown_record_version_is_counted_and_shown_not_a_crash(capsys, monkeypatch):
    model = KafkaModel(brokers=(1,))
    model.add_transaction_log([1])
    c = Coordinator(tv=0)
    c.init(TID, now_ms())
    c.records[:] = records(c)
    log_of(model, c, UndecodedRecord(KIND_UNKNOWN_VERSION, 0, 5))
    fake(monkeypatch, model)
    done = run_cli(capsys, "transactions", "history", TID, "-b", "fake:9092", "-o", "json")
    assert done.code == 0, done.stderr
    assert [r["events"] for r in json.loads(done.stdout)] == [["initialised"], ["unknown_record"]]
    assert "1 records of unknown versions" in done.stderr


def test_diagnose_adds_the_history_line_and_without_the_log_changes_nothing_else():
    model, cluster = blocked_model()
    c = Coordinator(tv=0)
    shared_id(c, now_ms() - 10 * MIN)
    c.records[:] = records(c)
    log_of(model, c)
    (t,) = diagnose.run(cluster, ["billing"]).transactions
    assert t.history.startswith("initialised 4 times in the last hour by alternating producers: two instances share this id")
    assert t.history_evidence["inits_last_hour"] == 4 and t.history_evidence["fences_last_hour"] == 3

    with_log = diagnose.run(cluster, ["billing"])
    model.transaction_log_error = "TOPIC_AUTHORIZATION_FAILED"
    without = diagnose.run(cluster, ["billing"])
    (u,) = without.transactions
    assert u.history.startswith("undetermined: ") and "needs READ on Topic __transaction_state" in u.history
    assert u.history_evidence is None
    unchanged = lambda d: dataclasses.replace(d, taken_at_ms=0, transactions=[  # noqa: E731
        dataclasses.replace(x, history=None, history_evidence=None, age_ms=0, last_write_age_ms=0) for x in d.transactions])
    # 0: billing waits on a transaction in flight (tracked, within its timeout).
    assert unchanged(without) == unchanged(with_log) and without.exit_code == with_log.exit_code == 0


def test_a_pattern_reads_the_partitions_of_the_listed_ids_it_matches():
    model = KafkaModel(brokers=(1,))
    model.add_transaction_log([1, 1, 1, 1, 1])
    c = Coordinator(tv=0)
    shared_id(c, now_ms() - 10 * MIN)
    c.records[:] = records(c)
    log_of(model, c)
    from kafkatxn.model import TransactionDescription

    model.transactions[TID] = TransactionDescription(TID, 1, "Empty", 1000, 8, 60_000, -1, frozenset())
    cluster = FakeCluster(model)
    result = facts_history.read_history(cluster, [], pattern="billing-.*")
    assert {r.transactional_id for r in result.rows} == {TID} and not result.missing
    assert cluster.called("read_log_partition") == [("read_log_partition", coordinator_partition(TID, 5))]
