"""A coordinator the metadata already names, that has not taken its ``__transaction_state`` partition
over yet: its ListTransactions leaves the partition's ids out and says nothing of it. A producer id
missing from that listing is undetermined, never hanging (seen in the nemesis under a frozen broker,
as its log partitions moved: ``check`` called two tracked transactions hanging). Over the fake
cluster, no broker; the nemesis is the integration proof."""

from __future__ import annotations

import time

from kafkatxn import auditlog, gather, hanging, remedy, verdicts
from kafkatxn.model import ProducerState, TopicPartition, TransactionDescription
from tests.support.fake_kafka import FakeCluster, KafkaModel

A0 = TopicPartition("a", 0)
MAX = 60_000
TRACKED = "app-1"


def cluster(requests_before_takeover: int) -> FakeCluster:
    """a-0 holds producer 7's open transaction, which its coordinator tracks under ``app-1``; that
    coordinator answers ``requests_before_takeover`` coordinator requests before it has taken the
    id's log partition over."""
    model = KafkaModel(brokers=(1, 2))
    model.add_partition("a", 0, lso=10, hw=20)
    model.add_transaction_log([1, 2])
    log_partition = verdicts.coordinator_partition(TRACKED, 2)
    coordinator = (1, 2)[log_partition]
    old = int(time.time() * 1000) - 10 * MAX
    model.producers[A0] = [ProducerState(7, 0, 3, old, -1, 10)]
    model.transactions[TRACKED] = TransactionDescription(TRACKED, coordinator, "Ongoing", 7, 0, 3_600_000, old, frozenset({A0}))
    model.not_taken_over[(coordinator, log_partition)] = requests_before_takeover
    return FakeCluster(model)


def test_a_producer_id_its_coordinator_has_not_taken_over_is_undetermined_naming_the_log_partition():
    fake = cluster(requests_before_takeover=999)
    result = hanging.find_hanging(fake, max_transaction_timeout_ms=MAX)
    assert result.hanging == [] and result.long_running == []
    (row,) = result.undetermined
    assert (row.topic, row.producer_id) == ("a", 7)
    log_tp = f"__transaction_state-{verdicts.coordinator_partition(TRACKED, 2)}"
    assert log_tp in row.reason and any("NOT_COORDINATOR" in m for m in row.missing), (row.reason, row.missing)


def test_taken_over_before_the_probe_it_is_listed_again_and_tracked():
    fake = cluster(requests_before_takeover=1)  # the first listing misses it; the probes and the relisting see it
    result = hanging.find_hanging(fake, max_transaction_timeout_ms=MAX)
    assert result.hanging == [] and result.undetermined == []
    assert [(r.topic, r.transactional_id) for r in result.long_running] == [("a", TRACKED)]


def test_check_and_the_coordinator_view_agree_and_abort_writes_no_marker(tmp_path):
    view, _ = gather.coordinator_view(cluster(999), [7])
    assert view.transactional_ids == {} and not view.ids_complete
    fake = cluster(999)
    audit = auditlog.AuditLog(tmp_path / "audit.jsonl")
    result = remedy.abort(fake, all_hanging=True, max_transaction_timeout_ms=MAX, audit=audit, confirm=lambda rows: True)
    assert fake.called("write_abort_marker") == []
    assert result.exit_code == 3
    assert fake.model.offsets[A0] == [10, 20]  # LSO and HW unchanged


def test_the_log_probe_ids_hash_to_their_partitions():
    from kafkatxn.kafka.transactions import log_probe_ids

    for partitions in (1, 3, 50):
        ids = log_probe_ids(partitions)
        assert [verdicts.coordinator_partition(i, partitions) for i in ids] == list(range(partitions))


# -- the recheck right before a marker, while coordinators move --------------------------------


def hanging_cluster(timeout_s: float) -> FakeCluster:
    """a-0 pinned by producer 7, whose coordinators track no transactional id: hanging."""
    model = KafkaModel(brokers=(1, 2))
    model.add_partition("a", 0, lso=10, hw=20)
    model.add_transaction_log([1, 2])
    model.producers[A0] = [ProducerState(7, 0, 3, int(time.time() * 1000) - 10 * MAX, -1, 10)]
    return FakeCluster(model, timeout_s=timeout_s)


def abort_while_log_partition_moves(fake: FakeCluster, requests_before_takeover: int, tmp_path):
    """The plan says hanging; as the person confirms, broker 1's log partition moves, and broker 1
    answers ``requests_before_takeover`` coordinator requests before it has taken it over."""

    def confirm(rows) -> bool:
        assert [r.outcome for r in rows] == [remedy.Outcome.WOULD_ABORT]
        fake.model.not_taken_over[(1, 0)] = requests_before_takeover
        return True

    audit = auditlog.AuditLog(tmp_path / "audit.jsonl")
    started = time.monotonic()
    result = remedy.abort(fake, all_hanging=True, max_transaction_timeout_ms=MAX, audit=audit, confirm=confirm)
    (row,) = result.rows
    return row, time.monotonic() - started


def test_the_recheck_waits_out_a_coordinator_taking_its_log_partition_over_then_aborts(tmp_path):
    """CI (stop 59): the partition's leader was killed after the plan; the recheck found the new
    leader, asked the coordinators before they had loaded the log partitions the dead broker led,
    and refused the confirmed abort as undetermined. A coordinator taking a partition over answers
    within seconds: the recheck asks again, within its share of the deadline."""
    fake = hanging_cluster(timeout_s=10)
    row, _ = abort_while_log_partition_moves(fake, 4, tmp_path)
    assert row.outcome is remedy.Outcome.ABORTED, row.reason
    assert len(fake.called("write_abort_marker")) == 1


def test_a_coordinator_that_never_takes_over_is_refused_within_the_share_and_writes_nothing(tmp_path):
    fake = hanging_cluster(timeout_s=1.5)
    row, took_s = abort_while_log_partition_moves(fake, 10_000, tmp_path)
    assert row.outcome is remedy.Outcome.REFUSED
    assert "__transaction_state-0" in row.reason and "undetermined" in row.reason, row.reason
    assert fake.called("write_abort_marker") == []
    assert fake.model.offsets[A0] == [10, 20]  # LSO and HW unchanged
    assert 0.4 < took_s < 1.5 * 2 / 3 + 0.5  # waited, within the share that keeps the rest for acting


def test_an_id_the_principal_may_not_see_is_refused_at_once_not_waited_out(tmp_path):
    fake = hanging_cluster(timeout_s=10)

    def see_all_at_plan_only(rows) -> bool:
        assert [r.outcome for r in rows] == [remedy.Outcome.WOULD_ABORT]
        fake.model.describable = lambda tid: False  # DESCRIBE on TransactionalId taken away: ids filtered
        return True

    audit = auditlog.AuditLog(tmp_path / "audit.jsonl")
    started = time.monotonic()
    result = remedy.abort(fake, all_hanging=True, max_transaction_timeout_ms=MAX, audit=audit, confirm=see_all_at_plan_only)
    (row,) = result.rows
    assert row.outcome is remedy.Outcome.REFUSED and fake.called("write_abort_marker") == []
    assert "not authorized to see every transactional id" in row.reason, row.reason
    assert time.monotonic() - started < 1.0


def test_only_passing_gaps_may_settle():
    from kafkatxn.model import Broker, Missing
    from kafkatxn.remedy.abort import may_settle

    log_tp = TopicPartition("__transaction_state", 3)
    assert may_settle([Missing(log_tp, "broker 2 did not coordinate it yet (COORDINATOR_LOAD_IN_PROGRESS)")])
    assert may_settle([Missing(Broker(2), "no answer")])
    assert not may_settle([])
    assert not may_settle([Missing(log_tp, "not authorized", acl="DESCRIBE on TransactionalId x")])
    assert not may_settle(list(verdicts.hidden_ids(verdicts.IDS_FILTERED)))
    assert not may_settle([Missing(verdicts.IDS_PART, "the brokers are too old")])
