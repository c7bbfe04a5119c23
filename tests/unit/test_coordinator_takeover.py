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
