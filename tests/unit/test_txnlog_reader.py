"""One process reads ``__transaction_state`` without Spark: the reader (kafkatxn/kafka/log_reader.py) over
a consumer that serves records a real broker wrote (tests/unit/vectors/real_broker_captures.json), and
the decoder's never-raising entry point. No broker: the consumer is a stand-in with the calls the reader makes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import KafkaError

from kafkatxn.audit import rules
from kafkatxn.kafka.txnlog import decode
from kafkatxn.verdicts import coordinator_partition
from kafkatxn.txnlog_records import (
    KIND_CORRUPT, KIND_UNKNOWN_VERSION, DecodeCounts, TxnLogEntry, TxnLogRecord, UndecodedRecord,
)
from kafkatxn.kafka import log_reader

CAPTURES = json.loads((Path(__file__).parent / "vectors" / "real_broker_captures.json").read_text())["captures"]
CAPTURE = next(c for c in CAPTURES if c["kafka_version"].startswith("4."))
KEY = bytes.fromhex(CAPTURE["records"][0]["key"])
UNKNOWN_VALUE = bytes.fromhex("0007" "deadbeef")  # value version 7: a newer broker's
CORRUPT_VALUE = bytes.fromhex(CAPTURE["records"][1]["value"])[:-3]  # truncated
T0 = 1_800_000_000_000


class _Message:
    def __init__(self, partition: int, offset: int, key: bytes | None = None, value: bytes | None = None, ts: int = -1, eof: bool = False):
        self._partition, self._offset, self._key, self._value, self._ts, self._eof = partition, offset, key, value, ts, eof

    def error(self):
        return KafkaError(KafkaError._PARTITION_EOF) if self._eof else None

    def partition(self):
        return self._partition

    def offset(self):
        return self._offset

    def key(self):
        return self._key

    def value(self):
        return self._value

    def timestamp(self):
        return (1, self._ts)


class _Topic:
    def __init__(self, partitions):
        self.partitions = {p: None for p in partitions}
        self.error = None


class FakeConsumer:
    """A log per partition: a list of (key, value, timestamp) at offsets 0, 1, …"""

    def __init__(self, logs: dict[int, list[tuple]]):
        self.logs = logs
        self.at: tuple[int, int] | None = None
        self.assigned: list[tuple[int, int]] = []
        self.closed = False

    def list_topics(self, topic, timeout):
        return type("Metadata", (), {"topics": {topic: _Topic(self.logs)}})()

    def get_watermark_offsets(self, tp, timeout, cached):
        return 0, len(self.logs[tp.partition])

    def offsets_for_times(self, tps, timeout):
        for tp in tps:
            log = self.logs[tp.partition]
            tp.offset = next((i for i, (_, _, ts) in enumerate(log) if ts >= tp.offset), -1)
        return tps

    def assign(self, tps):
        [tp] = tps
        start = 0 if tp.offset < 0 else tp.offset
        self.at = (tp.partition, start)
        self.assigned.append(self.at)

    def consume(self, num_messages, timeout):
        partition, offset = self.at
        log = self.logs[partition]
        out = [_Message(partition, o, *log[o]) for o in range(offset, min(offset + num_messages, len(log)))]
        self.at = (partition, offset + len(out))
        if self.at[1] >= len(log):
            out.append(_Message(partition, len(log), eof=True))
        return out

    def close(self):
        self.closed = True


def _broker_log() -> dict[int, list[tuple]]:
    """Partition 0: what the 4.x broker wrote for capture-tx-1 (its coordinator partition of 5);
    partition 3: a newer broker's record and a damaged one, then a tombstone of another id."""
    records = sorted(CAPTURE["records"], key=lambda r: r["expected"]["log_offset"])
    zero = [(bytes.fromhex(r["key"]), r["value"] and bytes.fromhex(r["value"]), T0 + i) for i, r in enumerate(records)]
    other = bytes.fromhex("0000" "0004") + b"gone"
    three = [(KEY, UNKNOWN_VALUE, T0 + 100), (KEY, CORRUPT_VALUE, T0 + 101), (other, None, T0 + 102)]
    return {0: zero, 1: [], 2: [], 3: three, 4: []}


@pytest.fixture
def consumer(monkeypatch):
    fake = FakeConsumer(_broker_log())
    monkeypatch.setattr(log_reader, "_consumer", lambda conf: fake)
    return fake


def _read(**kwargs) -> list[TxnLogEntry]:
    return [e for chunk in log_reader.read_transaction_log({"bootstrap.servers": "b:9092"}, **kwargs) for e in chunk]


def test_one_id_history_in_one_process(consumer):
    """What a ``transactions history TID`` command does: the id's coordinator partition, read and decoded."""
    tid = CAPTURE["records"][0]["expected"]["transactional_id"]
    counts = DecodeCounts()
    entries = _read(partitions=[coordinator_partition(tid, len(consumer.logs))], counts=counts, batch_size=2)
    records = [e.record for e in entries]
    expected = sorted((r["expected"] for r in CAPTURE["records"]), key=lambda r: r["log_offset"])
    assert [_fields(r) for r in records] == expected
    assert [e.timestamp_ms for e in entries] == [T0 + i for i in range(len(expected))]
    assert counts == DecodeCounts(records=len(expected))
    assert consumer.closed and consumer.assigned == [(0, 0)]
    stats = rules.summarize_id(records)
    assert (stats.inits, stats.commits, stats.transactions) == (1, 1, 1)


def _fields(record: TxnLogRecord) -> dict:
    out = {f: getattr(record, f) for f in record.__slots__}
    out["partitions"] = list(out["partitions"])
    return out


def test_records_not_decoded_are_returned_and_counted_not_raised(consumer):
    counts = DecodeCounts()
    entries = _read(partitions=[3], counts=counts)
    unknown, corrupt, tombstone = (e.record for e in entries)
    assert unknown == UndecodedRecord(KIND_UNKNOWN_VERSION, 3, 0)
    assert corrupt.kind == KIND_CORRUPT and (corrupt.log_partition, corrupt.log_offset) == (3, 1) and "past the end" in corrupt.error
    assert tombstone == TxnLogRecord("gone", tombstone=True, log_partition=3, log_offset=2)
    assert entries[2].timestamp_ms == T0 + 102  # a tombstone's only time
    assert counts == DecodeCounts(records=1, unknown_version=1, corrupt=1)


def test_all_partitions_by_default_from_a_start_time_or_offsets_up_to_given_ends(consumer):
    everything = _read()
    assert [(e.record.log_partition, e.record.log_offset) for e in everything] == [
        *((0, o) for o in range(len(consumer.logs[0]))), (3, 0), (3, 1), (3, 2)
    ]
    assert [e.record.log_offset for e in _read(partitions=[0, 3], start_time_ms=T0 + 101)] == [1, 2]  # nothing in 0 that late
    assert [e.record.log_offset for e in _read(partitions=[3], start_offsets={3: 1})] == [1, 2]
    assert [e.record.log_offset for e in _read(partitions=[3], start_offsets={3: 0}, end_offsets={3: 2})] == [0, 1]
    assert _read(partitions=[3], start_offsets={3: 2}, end_offsets={3: 2}) == []
    with pytest.raises(ValueError, match="not both"):
        _read(start_offsets={}, start_time_ms=T0)


def test_a_read_that_outlives_its_deadline_raises_timeout_naming_the_partition(consumer, monkeypatch):
    monkeypatch.setattr(consumer, "consume", lambda num_messages, timeout: [])  # a partition that never delivers
    end = len(consumer.logs[0])
    with pytest.raises(TimeoutError, match=rf"reading __transaction_state-0 up to offset {end} did not finish within 0.3s"):
        _read(partitions=[0], timeout_ms=300)
    assert consumer.closed


def test_decode_never_raises_and_counts_each_kind():
    counts = DecodeCounts()
    good = decode(KEY, bytes.fromhex(CAPTURE["records"][1]["value"]), 0, 1, counts)
    assert type(good) is TxnLogRecord and good.state == CAPTURE["records"][1]["expected"]["state"]
    assert decode(bytes.fromhex("0009" "0000"), b"", 0, 2, counts) == UndecodedRecord(KIND_UNKNOWN_VERSION, 0, 2)
    assert decode(None, None, 0, 3, counts).kind == KIND_CORRUPT
    assert decode(KEY, CORRUPT_VALUE, 0, 4, counts).kind == KIND_CORRUPT
    assert counts == DecodeCounts(records=1, unknown_version=1, corrupt=2)


def test_coordinator_partition_is_kafkas_choice():
    # The broker put capture-tx-1 on partition 0 of its 5 (the harness's transaction.state.log.num.partitions).
    assert {r["expected"]["log_partition"] for c in CAPTURES for r in c["records"]} == {0}
    assert coordinator_partition("capture-tx-1", 5) == 0
    # Java: "Aa".hashCode() == "BB".hashCode() == 2112; "polygenelubricants".hashCode() == Integer.MIN_VALUE,
    # which Kafka's Utils.abs maps to 0; a character outside the BMP hashes as its two UTF-16 units.
    assert coordinator_partition("Aa", 1000) == coordinator_partition("BB", 1000) == 112
    assert coordinator_partition("polygenelubricants", 7) == 0
    assert coordinator_partition("\U0001F600", 10**7) == 31 * 0xD83D + 0xDE00
    assert coordinator_partition("tx-" + "z" * 40, 50) == abs(_java_hash("tx-" + "z" * 40)) % 50


def _java_hash(text: str) -> int:
    h = 0
    for ch in text:  # ASCII only: one UTF-16 unit per character
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def test_given_ids_only_their_records_are_decoded_and_the_read_says_where_it_ended(consumer):
    """What ``transactions history`` asks: other ids' records are skipped before decoding (not counted);
    a key of a version the decoder does not know still comes through, as unknown."""
    counts, ends = DecodeCounts(), {}
    entries = _read(partitions=[3], counts=counts, transactional_ids=["capture-tx-none"], next_offsets=ends)
    assert entries == [] and counts == DecodeCounts() and ends == {3: 3}
    entries = _read(partitions=[3], counts=counts, transactional_ids=[CAPTURE["records"][0]["expected"]["transactional_id"]])
    assert [e.record.kind for e in entries] == [KIND_UNKNOWN_VERSION, KIND_CORRUPT]  # the tombstone is another id's
    consumer.logs[3].append((bytes.fromhex("0001" "0001") + b"x", b"", T0 + 103))  # key version 1
    assert [e.record.kind for e in _read(partitions=[3], transactional_ids=["y"])] == [KIND_UNKNOWN_VERSION]
