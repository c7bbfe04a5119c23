"""A Fetch answer read from its bytes (kafkatxn/kafka/wire/fetch_answers.py) is what the wire's decoder
makes of kafka-python's decoding of the same bytes, at every version the wire sends (4-12)."""

from __future__ import annotations

import pytest

from kafkatxn.kafka import protocol as p
from kafkatxn.kafka import wire
from kafkatxn.kafka.offsets import first_readable
from kafkatxn.kafka.wire import client as wire_client
from kafkatxn.kafka.wire.fetch import BatchRecords, _decode_fetch
from kafkatxn.kafka.wire.fetch_answers import read_fetch
from kafkatxn.model import TopicPartition

VERSIONS = range(4, 13)
MARKER = {"COMMIT": (0).to_bytes(2, "big") + (1).to_bytes(2, "big"), "ABORT": (0).to_bytes(4, "big")}


def _batch(base, records, producer=(-1, -1), transactional=False, control=False, compression=0, gaps=0):
    """Record batch bytes as a broker stores them (kafka-python's own builder); ``gaps``: offsets
    compaction removed after the first record (the batch's last offset past its count)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=transactional,
                                  producer_id=producer[0], producer_epoch=producer[1], base_sequence=0 if producer[0] >= 0 else -1,
                                  batch_size=1 << 20)
    for i, (ts, key, value) in enumerate(records):
        b.append(i + (gaps if i else 0), timestamp=ts, key=key, value=value, headers=[])
    out = bytearray(b.build())
    out[0:8] = base.to_bytes(8, "big")
    if control:  # the control flag (attributes bit 5); the CRC covers it, and nothing here checks CRCs
        out[22] |= 0x20
    return bytes(out)


def _legacy(offset, value, magic):
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    b = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
    b.append(offset, timestamp=1_700_000_000_000 if magic else None, key=b"k", value=value)
    return bytes(b.build())


def _records(n, base=0):
    return _batch(base, [(1_700_000_000_000 + i, None, b"r") for i in range(n)], producer=(1000, 0))


def answer(throttle_ms=7):
    """kafka-python's FetchResponse with partitions of every shape the reader meets."""
    from kafka.protocol.consumer.fetch import FetchResponse as R

    P = R.FetchableTopicResponse.PartitionData
    corrupt = bytearray(_batch(30, [(1, b"k", b"v")]))
    corrupt[-4:] = b"\xff\xff\xff\xff"  # its record's varints run past the end: read when its records are
    short = bytearray(_records(3))
    short[8:12] = (20).to_bytes(4, "big")  # a batch whose length is shorter than a header: kafka-python's error
    txn = (7, 3)
    shapes = {
        0: _records(8),  # one plain batch: the probe's usual answer
        1: _records(3) + _records(4, base=3) + _records(2, base=7),  # several
        2: _batch(5, [(1, b"a", b"x"), (2, b"b", b"y"), (3, b"c", b"z")], gaps=4),  # compacted: gaps in its offsets
        3: (_batch(10, [(1_700_000_000_000, b"k", b"v"), (1_700_000_000_005, None, b"w")], producer=txn, transactional=True)
            + _batch(12, [(1_700_000_000_009, MARKER["ABORT"], b"\x00" * 6)], producer=txn, transactional=True, control=True)
            + _batch(13, [(1_700_000_000_010, b"z", b"gz")], compression=1)  # gzip
            + _records(2, base=14)[:-5]),  # the answer's size cut the last batch short
        4: _batch(0, [(1, MARKER["COMMIT"], b"\x00" * 6)], producer=txn, transactional=True, control=True),
        5: _legacy(0, b"old", 0) + _legacy(1, b"older", 1),  # message formats 0 and 1
        6: bytes(corrupt),
        7: bytes(short) + _records(2, base=3),
        8: _records(2)[:30],  # only part of a batch
        9: b"",
        10: None,
    }
    partitions = [
        P(partition_index=i, error_code=0, high_watermark=40 + i, last_stable_offset=30 + i, log_start_offset=i,
          aborted_transactions=[P.AbortedTransaction(producer_id=8, first_offset=4), P.AbortedTransaction(producer_id=7, first_offset=10)]
          if i == 3 else ([] if i % 2 else None), preferred_read_replica=-1, records=records)
        for i, records in shapes.items()
    ]
    partitions.append(P(partition_index=11, error_code=1, high_watermark=-1, last_stable_offset=-1, log_start_offset=-1,
                        aborted_transactions=None, preferred_read_replica=-1, records=None))  # OFFSET_OUT_OF_RANGE
    partitions.append(P(partition_index=12, error_code=6, high_watermark=-1, last_stable_offset=-1, log_start_offset=-1,
                        aborted_transactions=None, preferred_read_replica=-1, records=_records(1)))  # an error: records not read
    topics = [R.FetchableTopicResponse(topic="orders", partitions=partitions),
              R.FetchableTopicResponse(topic="z" * 200 + "-\u00e9", partitions=[
                  P(partition_index=i, error_code=0, high_watermark=9, last_stable_offset=9, log_start_offset=0,
                    aborted_transactions=[], preferred_read_replica=-1, records=_records(5 + i)) for i in range(150)]),
              R.FetchableTopicResponse(topic="empty", partitions=[])]
    return R(throttle_time_ms=throttle_ms, error_code=0, session_id=0, responses=topics)


def asked(response):
    return p.Fetch(tuple(p.FetchOffset(TopicPartition(t.topic, part.partition_index), 0)
                         for t in response.responses for part in t.partitions), True)


def decoded(raw: bytes, version: int):
    from kafka.protocol.consumer.fetch import FetchResponse as R

    got = _decode_fetch(asked(answer()), R.decode(raw, version=version))
    return got


def same(a: p.FetchResponse, b: p.FetchResponse) -> None:
    """Equal answers, every batch's records read (a corrupt one raising alike) and compared."""
    assert a.error == b.error and len(a.partitions) == len(b.partitions)
    for x, y in zip(a.partitions, b.partitions):
        assert x[:6] == y[:6]
        assert len(x.batches) == len(y.batches), x.tp
        for bx, by in zip(x.batches, y.batches):
            assert bx[:6] == by[:6] and bx.record_count == by.record_count and bx.gapless == by.gapless
            try:
                theirs = tuple(by.records)
            except p.UnreadableRecords as exc:
                with pytest.raises(p.UnreadableRecords, match="CORRUPT_MESSAGE") as mine:
                    tuple(bx.records)
                assert str(mine.value) == str(exc)
            else:
                assert tuple(bx.records) == theirs


@pytest.mark.parametrize("version", VERSIONS)
def test_a_fetch_answer_read_from_its_bytes_is_what_the_decoder_makes_of_kafka_pythons(version):
    raw = bytes(answer().encode(version=version))
    read = read_fetch(memoryview(raw), version)
    assert read is not None and read[1] == 7
    same(read[0], decoded(raw, version))  # the partitions' fields and batches, records compared as read
    got = {part.tp.partition: part for part in read[0].partitions if part.tp.topic == "orders"}
    assert got[6].error is None and got[7].error is not None and got[7].error.startswith("CORRUPT_MESSAGE")
    assert [len(got[i].batches) for i in (0, 1, 2, 3, 4, 5, 8, 9, 10)] == [1, 3, 1, 3, 1, 2, 0, 0, 0]
    assert got[0].batches[0].gapless and not got[2].batches[0].gapless
    assert isinstance(got[0].batches[0].records, BatchRecords)  # read when first used (the probe reads none)


@pytest.mark.parametrize("version", VERSIONS)
def test_the_probe_finds_the_same_first_record_in_an_answer_read_from_its_bytes(version):
    raw = bytes(answer().encode(version=version))
    read = read_fetch(memoryview(raw), version)[0]
    for mine, theirs in zip(read.partitions, decoded(raw, version).partitions):
        if mine.error is None:
            for start in (0, 3, 5, 9, 11, 12, 14, 40):
                for committed in (True, False):
                    for stamped in (True, False):
                        try:
                            expected = first_readable(theirs, start, committed, stamped)
                        except p.UnreadableRecords:
                            with pytest.raises(p.UnreadableRecords):
                                first_readable(mine, start, committed, stamped)
                        else:
                            assert first_readable(mine, start, committed, stamped) == expected


def test_tagged_fields_are_skipped_and_a_version_the_wire_does_not_send_is_kafka_pythons():
    """v12's tagged fields (a partition's current leader, the topic's and the answer's own) hold
    nothing the decoder reads: the answer is the decoder's all the same."""
    raw = bytearray(answer().encode(version=12))
    expected = decoded(bytes(raw), 12)
    tagged = bytes(raw[:-1]) + b"\x01\x09\x02\x07\x07"  # the answer's own tagged fields: one unknown tag
    same(read_fetch(memoryview(tagged), 12)[0], expected)
    assert read_fetch(memoryview(bytes(raw) + b"\x00"), 12) is None  # bytes after the end: not this answer
    assert read_fetch(memoryview(bytes(raw)), 13) is None and read_fetch(memoryview(bytes(raw)), 3) is None


def test_a_partitions_tagged_fields_are_skipped():
    from kafka.protocol.consumer.fetch import FetchResponse as R

    P = R.FetchableTopicResponse.PartitionData
    part = P(partition_index=0, error_code=6, high_watermark=-1, last_stable_offset=-1, log_start_offset=-1,
             aborted_transactions=None, preferred_read_replica=-1, records=None,
             current_leader=P.LeaderIdAndEpoch(leader_id=2, leader_epoch=5))
    resp = R(throttle_time_ms=0, error_code=0, session_id=0, responses=[R.FetchableTopicResponse(topic="orders", partitions=[part])])
    raw = bytes(resp.encode(version=12))
    assert read_fetch(memoryview(raw), 12)[0] == _decode_fetch(p.Fetch((), True), R.decode(raw, version=12))
    assert read_fetch(memoryview(raw), 12)[0].partitions[0].error == "NOT_LEADER_OR_FOLLOWER"


def test_kafka_pythons_parser_hands_over_a_fetch_answer_read_by_the_wire():
    """A Fetch sent through the Wire has its answer read from the bytes (not kafka-python's objects
    per partition): kafka-python's own parser reads the answer's header and asks the request's header
    for the class to decode it with."""
    from kafka.protocol.api_header import ResponseHeader
    from kafka.protocol.parser import KafkaProtocol

    expected = answer(throttle_ms=5)
    w = wire.Wire(None)
    request = asked(expected)
    for version in (4, 11, 12):
        sent = w._reused(1, request)
        sent.API_VERSION = version
        parser = KafkaProtocol(client_id="kafkatxn")
        correlation_id = parser.send_request(sent)
        body = ResponseHeader(correlation_id=correlation_id).encode(flexible=version >= 12) + bytes(expected.encode(version=version))
        ((got_id, got),) = parser.receive_bytes(len(body).to_bytes(4, "big") + body)
        assert got_id == correlation_id and isinstance(got, wire_client.Read) and got.throttle_time_ms == 5
        same(w._decode(request, got), decoded(bytes(expected.encode(version=version)), version))
