"""The facade's read of ``__transaction_state`` over the wire's Fetch (kafkatxn/kafka/transaction_log.py
and log_reader.read_fetched / follow_fetched), against the fake wire: paged reads decoded by the one
decoder, a start time through ListOffsets by time, a log start above 0, a refused read, a follow."""

from __future__ import annotations

import pytest

from kafkatxn.kafka.txnlog_encode import encode_key, encode_value_v1
from kafkatxn.txnlog_records import KIND_UNKNOWN_VERSION, DecodeCounts, TxnLogRecord
from kafkatxn.facts_history import READ_ACL, _missing
from kafkatxn.kafka import protocol as p
from kafkatxn.kafka.log_fetch import LogReadError
from kafkatxn.kafka.transaction_log import TransactionLogApi
from tests.support.fake_kafka import FakeCluster, KafkaModel

T0 = 1_800_000_000_000
IDS = ["app-a", "app-b"]


def value(pid, state, at):
    return encode_value_v1(producer_id=pid, producer_epoch=0, timeout_ms=60_000, state=state, partitions=None,
                           last_update_timestamp_ms=at, start_timestamp_ms=-1)


def log_cluster(n=6, log_start=0):
    """Partition 0 of a one-partition log: ``n`` records alternating app-a and app-b, one a batch, one a second apart."""
    model = KafkaModel(brokers=(1,))
    (tp,) = model.add_transaction_log([1])
    model.batches[tp] = [
        p.FetchedBatch(o, o, -1, -1, False, None, (p.FetchedRecord(o, T0 + 1000 * o, encode_key(IDS[o % 2]), value(o % 2, "Empty", T0 + 1000 * o)),))
        for o in range(log_start, n)
    ]
    model.offsets[tp] = [n, n]
    model.log_starts[tp] = log_start
    return FakeCluster(model), tp


def read(cluster, **kw):
    return [e for chunk in TransactionLogApi.read_log_partition(cluster, 0, **kw) for e in chunk]


def fetches(cluster):
    return [r.partitions[0].offset for _n, r in cluster.model.sent if isinstance(r, p.Fetch)]


def test_a_partition_is_read_page_after_page_to_its_end_and_decoded():
    cluster, _tp = log_cluster()
    cluster.model.batches_per_fetch = 4
    counts, ends = DecodeCounts(), {}
    entries = read(cluster, counts=counts, next_offsets=ends)
    assert [(e.record.transactional_id, e.record.log_offset, e.timestamp_ms) for e in entries] == [
        (IDS[o % 2], o, T0 + 1000 * o) for o in range(6)
    ]
    assert all(type(e.record) is TxnLogRecord for e in entries) and counts == DecodeCounts(records=6)
    assert fetches(cluster) == [0, 4] and ends == {0: 6}
    # given ids, the others' records are skipped undecoded
    assert [e.record.log_offset for e in read(cluster, transactional_ids=["app-b"])] == [1, 3, 5]


def test_since_starts_at_the_first_record_that_recent_and_a_quiet_log_reads_nothing():
    cluster, tp = log_cluster()
    assert [e.record.log_offset for e in read(cluster, start_time_ms=T0 + 3500)] == [4, 5]
    assert fetches(cluster) == [4]
    ends: dict[int, int] = {}
    assert read(cluster, start_time_ms=T0 + 60_000, next_offsets=ends) == [] and ends == {0: 6}
    asked = [r.timestamp_ms for _n, r in cluster.model.sent if isinstance(r, p.ListOffsetsAt)]
    assert asked == [T0 + 3500, T0 + 60_000, -1]  # the last: the end, where a follow goes on


def test_a_log_whose_start_moved_is_read_from_its_start():
    cluster, _tp = log_cluster(log_start=3)
    assert [e.record.log_offset for e in read(cluster)] == [3, 4, 5]
    assert fetches(cluster) == [0, 3]


def test_unknown_versions_come_through_counted():
    cluster, tp = log_cluster(n=2)
    cluster.model.batches[tp].append(p.FetchedBatch(2, 2, -1, -1, False, None, (p.FetchedRecord(2, T0, encode_key("app-a"), bytes.fromhex("0007beef")),)))
    cluster.model.offsets[tp] = [3, 3]
    counts = DecodeCounts()
    assert [getattr(e.record, "kind", None) for e in read(cluster, counts=counts)] == [None, None, KIND_UNKNOWN_VERSION]
    assert counts == DecodeCounts(records=2, unknown_version=1)


def test_a_refused_read_raises_with_kafkas_error_name_and_history_names_the_acl():
    cluster, tp = log_cluster()
    cluster.model.denied_topics["Fetch"] = {tp.topic}
    with pytest.raises(LogReadError) as refused:
        read(cluster)
    assert refused.value.code == "TOPIC_AUTHORIZATION_FAILED"
    assert _missing(tp.topic, 0, refused.value).acl == READ_ACL


def test_a_leader_that_does_not_answer_fails_the_read_in_one_line():
    model = KafkaModel(brokers=(1, 2))
    model.add_transaction_log([1])
    model.down.add(1)
    with pytest.raises(LogReadError, match=r"reading __transaction_state-0 failed: timed out \(broker 1\)"):
        read(FakeCluster(model, timeout_s=5))


def test_follow_streams_what_is_written_after_the_start_one_chunk_per_poll():
    cluster, tp = log_cluster(n=2)
    polls = iter([False, False, False, True])

    def stop():
        done = next(polls)
        if not done and len(cluster.model.batches[tp]) == 2:  # a record is written after the first poll
            cluster.model.batches[tp].append(p.FetchedBatch(2, 2, -1, -1, False, None, (p.FetchedRecord(2, T0, encode_key("app-a"), value(0, "Ongoing", T0)),)))
            cluster.model.offsets[tp] = [3, 3]
        return done

    chunks = list(TransactionLogApi.follow_log_partitions(cluster, {0: 2}, transactional_ids=["app-a"], stop=stop))
    assert [[(e.record.state, e.record.log_offset) for e in c] for c in chunks] == [[("Ongoing", 2)], [], []]
    waits = {r.max_wait_ms for _n, r in cluster.model.sent if isinstance(r, p.Fetch)}
    assert waits == {200}  # the broker holds each poll until a record comes


def test_an_executor_on_a_kerberos_cluster_reads_over_its_own_wire_not_librdkafka(monkeypatch):
    """The audit's executors get connection settings only; under GSSAPI (which confluent-kafka's wheels
    lack) they build a facade of their own from them and read the log partition over Fetch."""
    from kafkatxn.audit import source
    from kafkatxn.config import ConnectionConfig
    from kafkatxn.kafka import facade, log_reader

    cluster, _tp = log_cluster()
    built = []

    def own_facade(config):
        built.append(config)
        return cluster

    def no_consumer(conf):
        raise AssertionError("librdkafka cannot log in with GSSAPI")

    monkeypatch.setattr(facade, "Cluster", own_facade)
    monkeypatch.setattr(log_reader, "_consumer", no_consumer)
    kerberos = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "GSSAPI", "sasl.kerberos.service.name": "kafka"}
    options = source.reader_options(ConnectionConfig("kdc-broker:9093", dict(kerberos), timeout_ms=9000))
    conf = source._kafka_conf(options)
    rows = [r for chunk in source.read_partition_rows(conf, "__transaction_state", 0, 1, 5, timeout_ms=9000) for r in chunk]
    assert [(r[0], r[15]) for r in rows] == [(IDS[o % 2], o) for o in range(1, 5)]  # transactional id, log offset
    (config,) = built
    assert (config.bootstrap_servers, config.timeout_ms) == ("kdc-broker:9093", 9000)
    assert {k: config.settings[k] for k in kerberos} == kerberos
    # Other clusters' executors keep librdkafka's consumer.
    assert not log_reader.needs_wire(source._kafka_conf(source.reader_options(ConnectionConfig("b:9092"))))
