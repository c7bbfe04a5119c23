"""The transaction log of a real broker, read in one process (no Spark) by kafkatxn/kafka/log_reader.py:
what a ``transactions history TID`` command reads. The traffic comes from tests/scenarios.py (librdkafka),
and the producer ids it reports are librdkafka's own, not kafkatxn's."""

from __future__ import annotations

import time

from confluent_kafka.admin import AdminClient

from kafkatxn.audit import rules
from kafkatxn.kafka.txnlog import TOPIC
from kafkatxn.verdicts import coordinator_partition
from kafkatxn.txnlog_records import DecodeCounts, TxnLogRecord
from kafkatxn.kafka.log_reader import read_transaction_log
from harness.scenarios import run_transaction, unique


def _log_partitions(bootstrap: str) -> int:
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(TOPIC, timeout=30)
    return len(metadata.topics[TOPIC].partitions)


def test_one_ids_history_read_from_its_coordinator_partition(kafka, unique_name):
    kafka.create_topic(unique_name, partitions=2)
    bootstrap = kafka.bootstrap_servers
    tid = unique("history")
    started_ms = int(time.time() * 1000) - 1000  # the coordinator stamps records after this
    committed = run_transaction(bootstrap, unique_name, [0, 1], "committed", transactional_id=tid)
    aborted = run_transaction(bootstrap, unique_name, [1], "aborted", transactional_id=tid)
    conf = {"bootstrap.servers": bootstrap}

    # Every partition from a start time: the id's records are all on the partition Kafka picks for it.
    counts = DecodeCounts()
    everything = [e for chunk in read_transaction_log(conf, start_time_ms=started_ms, timeout_ms=30_000, counts=counts) for e in chunk]
    ours = [e for e in everything if getattr(e.record, "transactional_id", None) == tid]
    partition = coordinator_partition(tid, _log_partitions(bootstrap))
    assert ours and {e.record.log_partition for e in ours} == {partition}
    assert counts.records == len(everything) and counts.unknown_version == counts.corrupt == 0
    assert all(e.timestamp_ms >= started_ms for e in everything)

    # One process, one partition, from its beginning: the history of the id, in log order.
    history = [
        e.record
        for chunk in read_transaction_log(conf, [partition], timeout_ms=30_000, batch_size=3)
        for e in chunk
        if type(e.record) is TxnLogRecord and e.record.transactional_id == tid
    ]
    assert history == [e.record for e in ours]
    assert [r.log_offset for r in history] == sorted(r.log_offset for r in history)
    states = [r.state for r in history]
    first_end = states.index("CompleteCommit")
    assert states[0] == "Empty" and "Empty" in states[first_end:] and states[-1] == "CompleteAbort"
    assert {r.producer_id for r in history} == {committed.producer_id, aborted.producer_id}
    assert set(next(r for r in history if r.state == "PrepareCommit").partitions) == {f"{unique_name}-0", f"{unique_name}-1"}
    stats = rules.summarize_id(history)
    assert (stats.inits, stats.commits, stats.aborts, stats.fences, stats.timeouts) == (2, 1, 1, 0, 0)
