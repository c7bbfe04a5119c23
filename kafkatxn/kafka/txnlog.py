"""Pure decoder for records of Kafka's ``__transaction_state`` topic (no Spark, no Kafka client); the
encoder, for tests and benchmarks, is txnlog_encode.py, the typed records are in txnlog_records.py.

The transaction coordinator persists one record per transactional id, keyed by the id, on
this compacted internal topic. The formats below come from Apache Kafka's message schemas
``TransactionLogKey.json`` and ``TransactionLogValue.json`` (``transaction-coordinator/src/main/
resources/common/message/`` in 4.x; ``kafka-transaction-coordinator`` jar in 3.9) and from
``TransactionLog.keyToBytes``/``valueToBytes``/``read`` that write and read them.

Key, version 0 (the only one; in 4.x the version doubles as the coordinator record type)::

    int16 version = 0
    string TransactionalId          (int16 length, UTF-8; not nullable)

Value, prefixed by ``int16 version``. Version 0 is non-flexible::

    int64  ProducerId
    int16  ProducerEpoch
    int32  TransactionTimeoutMs
    int8   TransactionStatus        (index into STATES)
    TransactionPartitions           nullable array (int32 count, -1 = null) of
        string  Topic               (int16 length)
        []int32 PartitionIds        (int32 count)
    int64  TransactionLastUpdateTimestampMs
    int64  TransactionStartTimestampMs

Version 1 ("flexibleVersions": "1+") has the same fields in the same order, but arrays and
strings use compact lengths (unsigned varint of length + 1, 0 = null) and every struct (the
value and each PartitionsSchema entry) ends with a tagged-field section: unsigned varint
count, then per field unsigned varint tag, unsigned varint size, ``size`` bytes, tags in
ascending order. Tagged fields of the value, each written only when not at its default::

    tag 0  PreviousProducerId        int64, default -1
    tag 1  NextProducerId            int64, default -1
    tag 2  ClientTransactionVersion  int16, default 0
    tag 3  NextProducerEpoch         int16, default -1

(Read from the released jars: 3.9.1 has value version 1 but no tagged fields; 4.3.1 and 4.4.0
define all four, and their ``TransactionLog.valueToBytes`` sets tags 0-2 but not yet tag 3,
which Kafka's trunk writes.)

Unknown tags are skipped, as Kafka does (KIP-915: the value may only grow by tagged fields).
A record whose value is null is a tombstone: the transactional id expired or was removed.

Checked against Kafka itself: ``tests/unit/vectors/`` holds bytes written by Kafka 4.4.0's
generated serializer, and the tests feed the encoder's (txnlog_encode.py) output back to Kafka's reader
when a JVM and the Kafka jars are around. Where Kafka's generated reader is lenient this
decoder is stricter, and raises: trailing bytes after the value, a known tagged field whose
size does not match its type, and strings that are not valid UTF-8 (Kafka substitutes U+FFFD).
Like Kafka, it takes any negative v0 array length as null and skips tags it does not know.

The decoder is written for throughput (precompiled ``struct.Struct`` objects, single-byte
varint fast paths); every malformed input raises :class:`TxnLogDecodeError`, never an
``IndexError``/``struct.error``/``UnicodeDecodeError``. :func:`decode`, what readers call, never
raises: a version it does not know or a malformed record comes back as an ``UndecodedRecord``.
"""


from __future__ import annotations

import struct
from typing import Any, Callable

from kafkatxn.txnlog_records import (
    _FAST_RECORDS, KIND_CORRUPT, KIND_UNKNOWN_VERSION, DecodeCounts, TxnLogRecord, UndecodedRecord, _RecordBuilder,
)
from kafkatxn.model import TRANSACTION_STATES

__all__ = [
    "KEY_VERSION", "STATES", "TAG_CLIENT_TRANSACTION_VERSION", "TAG_NEXT_PRODUCER_EPOCH", "TAG_NEXT_PRODUCER_ID",
    "TAG_PREVIOUS_PRODUCER_ID", "TOPIC", "VALUE_VERSIONS", "TxnLogDecodeError", "TxnLogRecord", "UndecodedRecord",
    "decode", "decode_key", "decode_record", "decode_value",
]

# TransactionState ids: index = status byte (the facade keeps the one list, in id order).
STATES: tuple[str, ...] = TRANSACTION_STATES
_STATE_IDS = {name: i for i, name in enumerate(STATES)}

TOPIC = "__transaction_state"
KEY_VERSION = 0
VALUE_VERSIONS = (0, 1)

TAG_PREVIOUS_PRODUCER_ID = 0
TAG_NEXT_PRODUCER_ID = 1
TAG_CLIENT_TRANSACTION_VERSION = 2
TAG_NEXT_PRODUCER_EPOCH = 3
_KNOWN_TAGS = frozenset(
    (TAG_PREVIOUS_PRODUCER_ID, TAG_NEXT_PRODUCER_ID, TAG_CLIENT_TRANSACTION_VERSION, TAG_NEXT_PRODUCER_EPOCH)
)


class TxnLogDecodeError(ValueError):
    """The bytes are not a well-formed ``__transaction_state`` key or value (truncated, corrupt)."""


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_KEY_HEAD = struct.Struct(">hh")  # version, string length
_FIXED = struct.Struct(">qhib")  # ProducerId, ProducerEpoch, TransactionTimeoutMs, TransactionStatus
_TIMES = struct.Struct(">qq")  # TransactionLastUpdateTimestampMs, TransactionStartTimestampMs
_i16_unpack = _I16.unpack_from
_i32_unpack = _I32.unpack_from
_i64_unpack = _I64.unpack_from
_key_head_unpack = _KEY_HEAD.unpack_from
_fixed_unpack = _FIXED.unpack_from
_times_unpack = _TIMES.unpack_from
_FIXED_END = 2 + _FIXED.size  # the version prefix, then the fixed fields

_INT32_ARRAYS: dict[int, Any] = {}


def _int32_array_unpack(count: int):
    unpack = _INT32_ARRAYS.get(count)
    if unpack is None:
        unpack = struct.Struct(f">{count}i").unpack_from
        if count <= 4096:
            _INT32_ARRAYS[count] = unpack
    return unpack


_DECODE_ERRORS = (IndexError, struct.error, UnicodeDecodeError, OverflowError, MemoryError)


def _uvarint(data: bytes, pos: int) -> tuple[int, int]:
    """Unsigned varint at ``pos`` (at most 5 bytes, like Kafka's ByteUtils); returns (value, next pos)."""
    value = 0
    shift = 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise TxnLogDecodeError(f"unsigned varint longer than 5 bytes ending at byte {pos}")


def _skip_tagged_fields(data: bytes, pos: int, n: int) -> int:
    """Skip a whole tagged-field section starting at ``pos`` (its count); returns the next pos."""
    count, pos = _uvarint(data, pos)
    for _ in range(count):
        _, pos = _uvarint(data, pos)
        size, pos = _uvarint(data, pos)
        pos += size
        if pos > n:
            raise TxnLogDecodeError("tagged field runs past the end of the value")
    return pos


def _as_bytes(data: Any) -> bytes:
    if type(data) is bytes:
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"expected bytes, got {type(data).__name__}")


# --------------------------------------------------------------------------------------------
# Decoding
# --------------------------------------------------------------------------------------------


def decode_key(key: bytes | bytearray | memoryview | None) -> str | None:
    """The transactional id of a key, or None for a key version this decoder does not know."""
    if key is None:
        raise TxnLogDecodeError("record has a null key")
    key = _as_bytes(key)
    n = len(key)
    if n < 4:
        if n >= 2 and _i16_unpack(key, 0)[0] != KEY_VERSION:
            return None
        raise TxnLogDecodeError(f"key truncated: {n} bytes")
    version, length = _key_head_unpack(key, 0)
    if version != KEY_VERSION:
        return None
    if length < 0:
        raise TxnLogDecodeError("key has a null TransactionalId")
    if 4 + length != n:
        raise TxnLogDecodeError(f"key TransactionalId length {length} does not match the {n - 4} bytes that follow")
    try:
        return key[4:].decode("utf-8")
    except UnicodeDecodeError as e:
        raise TxnLogDecodeError(f"key TransactionalId is not UTF-8: {e}") from None


def _sorted_partitions(partitions: list[str]) -> tuple[str, ...]:
    """Kafka reads the partitions into a set: drop duplicates, then sort as plain strings."""
    if len(partitions) < 2:
        return tuple(partitions)
    if len(partitions) == 2:
        a, b = partitions
        return (a, b) if a < b else (b, a) if b < a else (a,)
    return tuple(sorted(set(partitions)))


def _decode_v0(data: bytes, n: int) -> tuple:
    producer_id, epoch, timeout_ms, status = _fixed_unpack(data, 2)
    pos = _FIXED_END
    count = _i32_unpack(data, pos)[0]
    pos += 4
    partitions: list[str] = []
    if count > 0:  # Kafka's reader takes any negative count as a null array
        append = partitions.append
        for _ in range(count):
            length = _i16_unpack(data, pos)[0]
            pos += 2
            if length < 0:
                raise TxnLogDecodeError("null Topic in TransactionPartitions")
            end = pos + length
            if end > n:
                raise TxnLogDecodeError("Topic runs past the end of the value")
            topic = data[pos:end].decode("utf-8")
            k = _i32_unpack(data, end)[0]
            pos = end + 4
            if k < 0:
                raise TxnLogDecodeError(f"null or negative PartitionIds count {k}")
            if k:
                pos = _read_partition_ids(data, pos, k, n, topic, append)
    last_update, start = _times_unpack(data, pos)
    pos += 16
    if pos != n:
        raise TxnLogDecodeError(f"{n - pos} unexpected trailing bytes after a version 0 value")
    if not 0 <= status < 8:
        raise TxnLogDecodeError(f"unknown TransactionStatus {status}")
    parts = _sorted_partitions(partitions)
    return (0, producer_id, epoch, STATES[status], parts, timeout_ms, start, last_update, 0, -1, -1, -1, ())


def _read_partition_ids(data: bytes, pos: int, k: int, n: int, topic: str, append: Callable[[str], None]) -> int:
    """``k`` int32 partition ids at ``pos``, appended as ``topic-id``; returns the position after them."""
    end = pos + 4 * k
    if end > n:
        raise TxnLogDecodeError("PartitionIds run past the end of the value")
    for p in (_INT32_ARRAYS.get(k) or _int32_array_unpack(k))(data, pos):
        append(f"{topic}-{p}")
    return end


# Tagged fields of a version 1 value (TransactionLogValue.json): tag -> (size, reader, type).
_VALUE_TAGS = {
    TAG_PREVIOUS_PRODUCER_ID: (8, _i64_unpack, "int64"),
    TAG_NEXT_PRODUCER_ID: (8, _i64_unpack, "int64"),
    TAG_CLIENT_TRANSACTION_VERSION: (2, _i16_unpack, "int16"),
    TAG_NEXT_PRODUCER_EPOCH: (2, _i16_unpack, "int16"),
}


def _decode_v1(data: bytes, n: int) -> tuple:
    producer_id, epoch, timeout_ms, status = _fixed_unpack(data, 2)
    pos = _FIXED_END
    count = data[pos]
    pos += 1
    if count & 0x80:
        count, pos = _uvarint(data, pos - 1)
    partitions: list[str] = []
    if count > 1:  # compact array: 0 = null, 1 = empty, else count + 1 entries
        append = partitions.append
        for _ in range(count - 1):
            length = data[pos]
            pos += 1
            if length & 0x80:
                length, pos = _uvarint(data, pos - 1)
            if not length:
                raise TxnLogDecodeError("null Topic in TransactionPartitions")
            end = pos + length - 1
            if end > n:
                raise TxnLogDecodeError("Topic runs past the end of the value")
            topic = data[pos:end].decode("utf-8")
            k = data[end]
            pos = end + 1
            if k & 0x80:
                k, pos = _uvarint(data, end)
            if not k:
                raise TxnLogDecodeError("null PartitionIds in TransactionPartitions")
            k -= 1
            if k == 1:
                append(f"{topic}-{_i32_unpack(data, pos)[0]}")
                pos += 4
            elif k:
                pos = _read_partition_ids(data, pos, k, n, topic, append)
            if data[pos]:  # this entry's tagged fields; none are defined, skip them all
                pos = _skip_tagged_fields(data, pos, n)
            else:
                pos += 1
    last_update, start = _times_unpack(data, pos)
    pos += 16
    tagged: dict[int, int] = {}
    unknown: tuple[int, ...] = ()
    ntags = data[pos]
    pos += 1
    if ntags:
        if ntags & 0x80:
            ntags, pos = _uvarint(data, pos - 1)
        for _ in range(ntags):
            tag = data[pos]
            pos += 1
            if tag & 0x80:
                tag, pos = _uvarint(data, pos - 1)
            size = data[pos]
            pos += 1
            if size & 0x80:
                size, pos = _uvarint(data, pos - 1)
            end = pos + size
            if end > n:
                raise TxnLogDecodeError(f"tagged field {tag} runs past the end of the value")
            known = _VALUE_TAGS.get(tag)
            if known is None:
                unknown += (tag,)
            else:
                width, unpack, kind = known
                if size != width:
                    raise TxnLogDecodeError(f"tagged field {tag} ({kind}) has size {size}")
                tagged[tag] = unpack(data, pos)[0]
            pos = end
    if pos != n:
        raise TxnLogDecodeError(f"{n - pos} unexpected trailing bytes after a version 1 value")
    if not 0 <= status < 8:
        raise TxnLogDecodeError(f"unknown TransactionStatus {status}")
    parts = _sorted_partitions(partitions)
    return (
        1, producer_id, epoch, STATES[status], parts, timeout_ms, start, last_update,
        tagged.get(TAG_CLIENT_TRANSACTION_VERSION, 0), tagged.get(TAG_PREVIOUS_PRODUCER_ID, -1),
        tagged.get(TAG_NEXT_PRODUCER_ID, -1), tagged.get(TAG_NEXT_PRODUCER_EPOCH, -1), unknown,
    )  # fmt: skip


def _decode_value_tuple(value: bytes) -> tuple | None:
    n = len(value)
    try:
        version = _i16_unpack(value, 0)[0]
        if version == 1:
            return _decode_v1(value, n)
        if version == 0:
            return _decode_v0(value, n)
        return None
    except _DECODE_ERRORS as e:
        raise TxnLogDecodeError(f"value truncated or corrupt ({n} bytes): {type(e).__name__}: {e}") from None


def decode_value(value: bytes | bytearray | memoryview | None) -> dict | None:
    """The fields of a value as a dict, or None for a null value (tombstone) or an unknown version.

    Keys: value_version, producer_id, producer_epoch, state, partitions, timeout_ms,
    start_timestamp_ms, last_update_timestamp_ms, client_transaction_version,
    previous_producer_id, next_producer_id, next_producer_epoch (as in :class:`TxnLogRecord`)
    and ``unknown_tags``, the tuple of value-level tags this decoder skipped.
    """
    if value is None:
        return None
    t = _decode_value_tuple(value if type(value) is bytes else _as_bytes(value))
    if t is None:
        return None
    return {
        "value_version": t[0],
        "producer_id": t[1],
        "producer_epoch": t[2],
        "state": t[3],
        "partitions": t[4],
        "timeout_ms": t[5],
        "start_timestamp_ms": t[6],
        "last_update_timestamp_ms": t[7],
        "client_transaction_version": t[8],
        "previous_producer_id": t[9],
        "next_producer_id": t[10],
        "next_producer_epoch": t[11],
        "unknown_tags": t[12],
    }


def decode_record(
    key: bytes | bytearray | memoryview | None,
    value: bytes | bytearray | memoryview | None,
    log_partition: int = -1,
    log_offset: int = -1,
) -> TxnLogRecord | None:
    """Decode one record; None when the key or value version is unknown (count and skip it).

    Raises :class:`TxnLogDecodeError` for a null, truncated or corrupt key or value.
    """
    tid = decode_key(key)
    if tid is None:
        return None
    if value is None:
        return TxnLogRecord(tid, tombstone=True, log_partition=log_partition, log_offset=log_offset)
    t = _decode_value_tuple(value if type(value) is bytes else _as_bytes(value))
    if t is None:
        return None
    if _FAST_RECORDS:
        record = _RecordBuilder(
            tid, t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9], t[10], t[11], t[0], False, log_partition, log_offset
        )
        record.__class__ = TxnLogRecord  # type: ignore[assignment]
        return record  # type: ignore[return-value]
    return TxnLogRecord(
        tid, t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9], t[10], t[11], t[0], False, log_partition, log_offset
    )


def decode(
    key: bytes | bytearray | memoryview | None,
    value: bytes | bytearray | memoryview | None,
    log_partition: int = -1,
    log_offset: int = -1,
    counts: DecodeCounts | None = None,
) -> TxnLogRecord | UndecodedRecord:
    """Decode one record, never raising: an unknown key or value version, or a malformed key or value,
    comes back as an :class:`UndecodedRecord` (with the reason for a malformed one); ``counts`` counts each kind."""
    try:
        record = decode_record(key, value, log_partition, log_offset)
    except TxnLogDecodeError as exc:
        out: TxnLogRecord | UndecodedRecord = UndecodedRecord(KIND_CORRUPT, log_partition, log_offset, str(exc)[:300])
    else:
        out = record if record is not None else UndecodedRecord(KIND_UNKNOWN_VERSION, log_partition, log_offset)
    if counts is not None:
        counts.count(out)
    return out
