"""An uncompressed record batch's records (message format 2) read by the wire: what kafka-python's
record reader (``kafka.record``'s ``DefaultRecordBatch``) makes of them, as :class:`~kafkatxn.kafka.protocol.FetchedRecord`.

``lso``, ``check`` and ``hanging`` read a few records a command (a pinning transaction's first record,
a page of ``__transaction_state``, a partition's markers); kafka-python's reader comes with its record
package and every compression codec it imports (``kafka.codec``: ~42 M instructions at import, 2 % of
``lso`` at 30,000 partitions). A compressed batch, and one these bytes do not read as kafka-python
reads them (a length past the end, bytes left over, a negative header count), is kafka-python's:
:func:`plain_records` returns None and the caller asks its reader, whose error is the answer as before.
``tests/unit/test_fetch_records.py`` compares the records with kafka-python's.
"""

from __future__ import annotations

import struct

from kafkatxn.kafka import protocol as p
from kafkatxn.kafka.varint import decode_zigzag_varint as _varint

# A batch's header (kafka-python's DefaultRecordBatch.HEADER_STRUCT): BaseOffset, Length,
# PartitionLeaderEpoch, Magic, CRC, Attributes, LastOffsetDelta, BaseTimestamp, MaxTimestamp,
# ProducerId, ProducerEpoch, BaseSequence, RecordsCount.
BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
_COMPRESSION = 0x07
_LOG_APPEND_TIME = 0x08


def plain_records(raw: bytes) -> tuple[p.FetchedRecord, ...] | None:
    """The records of the batch ``raw`` (the whole batch, its header first) when it is of format 2 and
    uncompressed, each as kafka-python's reader makes it (offset, timestamp, key, value; headers are
    read and left, as its readers here leave them); None where it is not read here."""
    if len(raw) < BATCH_HEADER.size:
        return None
    (base, _length, _epoch, magic, _crc, attributes, _delta, first_ts, max_ts, _producer, _epoch2, _sequence,
     count) = BATCH_HEADER.unpack_from(raw)
    if magic != 2 or attributes & _COMPRESSION or count < 0:
        return None
    log_append = attributes & _LOG_APPEND_TIME
    end = len(raw)
    pos = BATCH_HEADER.size
    out = []
    try:
        for _ in range(count):
            length, pos = _varint(raw, pos)
            start = pos
            _attributes, pos = _varint(raw, pos)
            ts_delta, pos = _varint(raw, pos)
            offset_delta, pos = _varint(raw, pos)
            size, pos = _varint(raw, pos)
            key = None
            if size >= 0:
                if pos + size > end:
                    return None
                key, pos = raw[pos : pos + size], pos + size
            size, pos = _varint(raw, pos)
            value = None
            if size >= 0:
                if pos + size > end:
                    return None
                value, pos = raw[pos : pos + size], pos + size
            headers, pos = _varint(raw, pos)
            if headers < 0:
                return None
            for _header in range(headers):
                size, pos = _varint(raw, pos)
                if size < 0 or pos + size > end:
                    return None
                str(raw[pos : pos + size], "utf-8")  # a header key kafka-python cannot decode is its error
                pos += size
                size, pos = _varint(raw, pos)
                if size >= 0:
                    if pos + size > end:
                        return None
                    pos += size
            if pos - start != length or pos > end:
                return None
            out.append(tuple.__new__(p.FetchedRecord, (base + offset_delta, max_ts if log_append else first_ts + ts_delta, key, value)))
    except (IndexError, UnicodeDecodeError):
        return None
    if pos != end:
        return None  # bytes after the last record: kafka-python's reader says how many
    return tuple(out)
