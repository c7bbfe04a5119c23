"""An uncompressed batch's records read by the wire (kafkatxn/kafka/wire/fetch_records.py) are what
kafka-python's record reader makes of them; a batch they do not read is kafka-python's, its error the same."""

import pytest

from kafkatxn.kafka import protocol as p
from kafkatxn.kafka.wire import fetch, fetch_answers
from kafkatxn.kafka.wire.fetch_records import plain_records


def _batch(base, records, *, control=False, log_append=False, headers=()):
    from kafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True, producer_id=7,
                                  producer_epoch=2, base_sequence=0, batch_size=1 << 20)
    for i, (ts, key, value) in enumerate(records):
        b.append(i * 3, timestamp=ts, key=key, value=value, headers=list(headers))
    out = bytearray(b.build())
    out[0:8] = base.to_bytes(8, "big")
    if control:
        out[22] |= 0x20
    if log_append:
        out[22] |= 0x08
    return bytes(out)


def _kafka_pythons(raw):
    from kafka.record import MemoryRecords

    return fetch._rows(MemoryRecords(raw).next_batch())


MARKER = (0).to_bytes(2, "big") + (1).to_bytes(2, "big")  # version 0, type 1: COMMIT
CASES = {
    "one": _batch(5, [(1_700_000_000_000, b"k", b"v")]),
    "many": _batch(2**40, [(1_700_000_000_000 + i * 1000, None if i % 3 else b"key%d" % i, None if i % 5 == 1 else b"x" * (i * 40))
                           for i in range(200)]),
    "headers": _batch(0, [(1, b"a", b"b"), (2, b"", b"")], headers=[("h\u00e9", b"1"), ("n", None)]),
    "log-append-time": _batch(9, [(1, b"a", b"b"), (5, b"c", b"d")], log_append=True),
    "negative-delta": _batch(0, [(1_700_000_000_000, b"a", b"b"), (1_600_000_000_000, b"c", b"d")]),
    "marker": _batch(12, [(1, MARKER, (0).to_bytes(6, "big"))], control=True),
    "empty": _batch(3, []),
}


@pytest.mark.parametrize("raw", CASES.values(), ids=CASES.keys())
def test_records_are_kafka_pythons(raw):
    assert plain_records(raw) == _kafka_pythons(raw)
    assert fetch.BatchRecords(raw) == _kafka_pythons(raw)


def test_a_batch_not_read_here_is_kafka_pythons_and_its_error_the_same():
    gzip = bytearray(CASES["one"])
    gzip[22] |= 0x01  # the compression bits: whatever follows is the codec's, never read here
    assert plain_records(bytes(gzip)) is None
    raw = CASES["many"]
    for broken in (raw[:-1], raw + b"\x00", raw[:70], raw[:61] + b"\xff" * (len(raw) - 61)):
        assert plain_records(broken) is None
        try:
            expected = _kafka_pythons(broken)  # what kafka-python's reader makes of it, or its error
        except Exception as exc:  # noqa: BLE001
            with pytest.raises(p.UnreadableRecords) as wires:
                list(fetch.BatchRecords(broken))
            assert str(wires.value) == f"CORRUPT_MESSAGE ({type(exc).__name__}: {exc})"
        else:
            assert fetch.BatchRecords(broken) == expected


def test_a_control_batch_read_by_the_wire_is_the_batch_kafka_pythons_reader_makes():
    from kafka.record import MemoryRecords

    raw = CASES["marker"] + CASES["one"]
    data = memoryview(b"\x00" * 4 + raw)
    got = fetch_answers.read_batches(data, 4, len(data))
    expected = fetch.batches(raw)
    assert got[0] == expected[0] and got[0].control == "COMMIT" and got[0].records == _kafka_pythons(CASES["marker"])
    assert list(got[1].records) == list(expected[1].records)
    assert expected[0] == fetch.typed_batch(MemoryRecords(CASES["marker"]).next_batch())
