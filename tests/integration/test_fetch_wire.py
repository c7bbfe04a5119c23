"""The wire's Fetch against a real broker and a real read_committed consumer (librdkafka's): on one
partition holding two transactions interleaved batch by batch (one aborted, one committed), a
transaction still open, and batches compressed with lz4, zstd and snappy, the read_committed probe
(``first_readable_offsets``) and the first-record read (``first_record_timestamps``) give, from every
start offset, what the consumer reads from there. The ground truth is the consumer's, never kafkatxn's.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition as CTP

from harness.scenarios import create_topic, unique
from kafkatxn.config import ConnectionConfig
from kafkatxn.kafka import Cluster
from kafkatxn.model import TopicPartition

pytestmark = pytest.mark.integration


def producer(bootstrap: str, tid: str, compression: str) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "compression.type": compression, "linger.ms": 0})
    p.init_transactions(20)
    p.begin_transaction()
    return p


def send(p: Producer, topic: str, n: int, tag: str) -> None:
    for i in range(n):
        p.produce(topic, f"{tag}-{i}".encode() * 20, key=tag.encode(), partition=0)  # repeated: worth compressing
    p.flush(20)


def consumed(bootstrap: str, topic: str, isolation: str) -> dict[int, int]:
    """Offset -> timestamp of every record a consumer at ``isolation`` reads from the start to its end."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("truth"), "isolation.level": isolation,
                  "enable.partition.eof": True, "enable.auto.commit": False})
    c.assign([CTP(topic, 0, 0)])
    out: dict[int, int] = {}
    try:
        while True:
            m = c.poll(20)
            assert m is not None, "the consumer did not reach the end"
            if m.error() is not None and m.error().code() == KafkaError._PARTITION_EOF:
                return out
            assert m.error() is None, m.error()
            out[m.offset()] = m.timestamp()[1]
    finally:
        c.close()


def test_fetch_reads_from_every_offset_what_a_consumer_at_each_isolation_level_reads(kafka):
    b = kafka.bootstrap_servers
    topic = unique("fetch-wire")
    create_topic(b, topic, partitions=1)
    aborted, committed = producer(b, unique("aborted"), "lz4"), producer(b, unique("committed"), "zstd")
    send(aborted, topic, 3, "a1")
    send(committed, topic, 2, "c1")
    send(aborted, topic, 2, "a2")
    send(committed, topic, 1, "c2")
    aborted.abort_transaction(20)
    committed.commit_transaction(20)
    still_open = producer(b, unique("open"), "snappy")
    send(still_open, topic, 2, "o")
    try:
        visible, every = consumed(b, topic, "read_committed"), consumed(b, topic, "read_uncommitted")
        assert len(visible) == 3 and len(every) == 3 + 2 + 2 + 1 + 2  # the truth has what the test made
        end = max(every) + 1
        tp = TopicPartition(topic, 0)
        with Cluster(ConnectionConfig(b, timeout_ms=20_000)) as cluster:
            for start in range(end + 1):
                cluster.restart_deadline()
                probe = cluster.first_readable_offsets({tp: start})
                assert not probe.missing, (start, probe.missing)
                assert probe.value[tp] == min((o for o in visible if o >= start), default=None), start
                dated = cluster.first_record_timestamps({tp: start})
                assert dated.value.get(tp) == every.get(start), (start, dated)
            assert cluster.requests["Fetch"] >= end and "ListOffsets" not in cluster.requests  # no reset needed here
    finally:
        still_open.abort_transaction(20)
