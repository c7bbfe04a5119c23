"""A Fetch answer read from its bytes: what :mod:`.fetch`'s decoder makes of kafka-python's objects.

The read_committed probes of a group pass ask one Fetch per leader for every partition a group
trails the LSO on: at 20,000 groups x 20 partitions, 100,000 partitions in one round, 16,700 an
answer on 6 brokers. kafka-python decodes such an answer into an object per partition, then the
decoder reads each partition's batches through kafka-python's record reader (an object per batch):
about 90 us a partition on this machine's two loaded cores, on kafka-python's IO thread, one answer
after another. Here the partitions' fields are read with :mod:`struct`, and a plain batch (magic 2,
uncompressed, not a control batch) from its 61-byte header: its records are decoded by kafka-python
when first read (:class:`~kafkatxn.kafka.wire.fetch.BatchRecords`; the probe reads none of a batch
without gaps). A control, compressed or old-format batch is kafka-python's, as before
(:func:`~kafkatxn.kafka.wire.fetch.typed_batch`); so is a partition's data that does not start
with whole batches of at least a header (:func:`~kafkatxn.kafka.wire.fetch.batches`: its error, the same).

Versions 4 to 12, every one the wire sends; tagged fields (v12: a diverging epoch, the current leader,
a snapshot id) are skipped, as the decoder reads none of them. ``tests/unit/test_wire_contract.py``
compares these answers with the decoder's over kafka-python's at every version.
"""

from __future__ import annotations

import struct

from kafkatxn.kafka import protocol as p
from kafkatxn.kafka.wire.fetch import MAX_VERSION, MIN_VERSION, BatchRecords, batches, control_type, typed_batch
from kafkatxn.kafka.wire.fetch_records import BATCH_HEADER as _BATCH_HEADER, plain_records
from kafkatxn.kafka.varint import decode_uvarint as _uvarint
from kafkatxn.kafka.wire.names import error_name
from kafkatxn.model import TopicPartition

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_FLEXIBLE = 12
_LOG_OVERHEAD = 12  # BaseOffset and Length: every format's batch starts with them
_MAGIC_AT = 16
_ATTRIBUTES_AT = 21
_COMPRESSION_OR_CONTROL = 0x07 | 0x20
_CONTROL = 0x20
_TRANSACTIONAL = 0x10
_ABORTED = struct.Struct(">qq")  # ProducerId, FirstOffset
# A partition's PartitionIndex, ErrorCode, HighWatermark, LastStableOffset and (v5+) LogStartOffset.
_PARTITION_HEAD_V4 = struct.Struct(">ihqq")
_PARTITION_HEAD_V5 = struct.Struct(">ihqqq")


def _skip_tagged_fields(data: memoryview, pos: int) -> int:
    count, pos = _uvarint(data, pos)
    for _ in range(count):
        _tag, pos = _uvarint(data, pos)
        size, pos = _uvarint(data, pos)
        pos += size
    return pos


def _length(data: memoryview, pos: int, flexible: bool, short: bool = False) -> tuple[int, int]:
    """An array's or a string's length (-1: null): a compact one's varint less one, else an int32
    (an int16 for a ``short`` string)."""
    if flexible:
        n, pos = _uvarint(data, pos)
        return n - 1, pos
    if short:
        return _INT16.unpack_from(data, pos)[0], pos + 2
    return _INT32.unpack_from(data, pos)[0], pos + 4


def read_batches(data: memoryview, start: int, end: int) -> tuple[p.FetchedBatch, ...]:
    """The batches of one partition's records (``data[start:end]``), as :func:`.fetch.batches` makes them."""
    out = []
    pos = start
    header_size = _BATCH_HEADER.size
    while end - pos >= _LOG_OVERHEAD:
        length = _INT32.unpack_from(data, pos + 8)[0]
        stop = pos + _LOG_OVERHEAD + length
        if stop > end:  # cut short by the answer's size: left out, as consumers do
            break
        if stop - pos < header_size or data[pos + _MAGIC_AT] != 2:  # too short for its header, or an old format
            return batches(bytes(data[start:end]))  # kafka-python's reader, and its error, as before
        raw = bytes(data[pos:stop])
        attributes = raw[_ATTRIBUTES_AT + 1]
        # An uncompressed control batch: its markers read by the wire (.fetch_records), as typed_batch makes them.
        markers = plain_records(raw) if attributes & _COMPRESSION_OR_CONTROL == _CONTROL else None
        if markers is not None:
            (base, _size, _epoch, _magic, _crc, _attributes, delta, _first_ts, _max_ts, producer_id, producer_epoch,
             _sequence, count) = _BATCH_HEADER.unpack_from(raw)
            out.append(p.FetchedBatch(base, base + delta, producer_id, producer_epoch, bool(attributes & _TRANSACTIONAL),
                                      control_type(markers), markers, count))
        elif attributes & _COMPRESSION_OR_CONTROL:
            from kafka.record import MemoryRecords

            one = typed_batch(MemoryRecords(raw).next_batch())
            if one is not None:
                out.append(one)
        else:
            (base, _size, _epoch, _magic, _crc, attributes, delta, _first_ts, _max_ts, producer_id, producer_epoch,
             _sequence, count) = _BATCH_HEADER.unpack_from(raw)
            out.append(tuple.__new__(p.FetchedBatch, (base, base + delta, producer_id, producer_epoch,
                                                      bool(attributes & _TRANSACTIONAL), None, BatchRecords(raw), count)))
        pos = stop
    return tuple(out)


def read_fetch(data: memoryview, version: int) -> tuple[p.FetchResponse, int] | None:
    """A Fetch answer's body (after the response header): the typed answer and its throttle time, or
    None for a version the wire does not send (kafka-python's then)."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        return None
    flexible = version >= _FLEXIBLE
    (throttle_ms,) = _INT32.unpack_from(data, 0)
    pos = 4
    error_code = 0
    if version >= 7:
        (error_code,) = _INT16.unpack_from(data, pos)
        pos += 6  # ErrorCode, SessionId
    topics, pos = _length(data, pos, flexible)
    head = _PARTITION_HEAD_V5 if version >= 5 else _PARTITION_HEAD_V4
    out: list[p.FetchedPartition] = []
    new = tuple.__new__  # a named tuple's own __new__ is a Python function: 16,700 partitions an answer
    for _ in range(max(topics, 0)):
        size, pos = _length(data, pos, flexible, short=True)
        topic = str(data[pos : pos + size], "utf-8")
        pos += size
        partitions, pos = _length(data, pos, flexible)
        for _ in range(max(partitions, 0)):
            index, code, high_watermark, last_stable, *log_start = head.unpack_from(data, pos)
            pos += head.size
            if flexible and data[pos] < 0x80:  # usually: no aborted transactions, a one-byte length
                aborted_count, pos = data[pos] - 1, pos + 1
            else:
                aborted_count, pos = _length(data, pos, flexible)
            aborted: tuple[p.AbortedTransaction, ...] = ()
            if aborted_count > 0:
                rows = []
                for _ in range(aborted_count):
                    rows.append(new(p.AbortedTransaction, _ABORTED.unpack_from(data, pos)))
                    pos += 16
                    if flexible:
                        pos = _skip_tagged_fields(data, pos)
                aborted = tuple(rows)
            if version >= 11:
                pos += 4  # PreferredReadReplica
            records, pos = _length(data, pos, flexible)
            start, pos = pos, pos + max(records, 0)
            if flexible:
                pos = pos + 1 if data[pos] == 0 else _skip_tagged_fields(data, pos)
            error = error_name(code) if code else None
            found: tuple[p.FetchedBatch, ...] = ()
            if error is None and records > 0:
                try:
                    found = read_batches(data, start, start + records)
                except Exception as exc:  # noqa: BLE001 - a batch this client cannot read is this partition's answer
                    error, found = f"CORRUPT_MESSAGE ({type(exc).__name__}: {exc})", ()
            out.append(new(p.FetchedPartition, (new(TopicPartition, (topic, index)), error, high_watermark, last_stable,
                                                log_start[0] if log_start else -1, aborted, found)))
        if flexible:
            pos = _skip_tagged_fields(data, pos)
    if flexible:
        pos = _skip_tagged_fields(data, pos)
    if pos != len(data):
        return None
    return p.FetchResponse(error_name(error_code), tuple(out)), throttle_ms
