"""Kafka's varints. The unsigned one: the lengths of flexible versions' compact arrays and strings (a whole
compact string read by :func:`decode_compact_string`), and the counts and tags of tagged fields, written in the requests the wire writes
(:mod:`kafkatxn.kafka.wire.bodies`) and the ``__transaction_state`` records the tests write
(:mod:`kafkatxn.kafka.txnlog_encode`), and read in the answers the wire reads from their bytes
(``bodies``, :mod:`kafkatxn.kafka.wire.fetch_answers`). The zigzag one (varint and varlong): the
fields of a record, read by :mod:`kafkatxn.kafka.wire.fetch_records`."""

from __future__ import annotations


def encode_uvarint(value: int) -> bytes:
    """``value`` as an unsigned varint: seven bits a byte, low bits first, the high bit set on all but the last."""
    if value < 0:
        raise ValueError(f"unsigned varint cannot hold {value}")
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_uvarint(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    """The unsigned varint at ``pos`` of an answer the wire reads from its bytes, and the position after
    it; IndexError past the end or past ten bytes (a varlong's most: a corrupt run of high bits would
    otherwise grow a big integer without end). Every reader takes an IndexError as an answer it cannot
    read, which is where such a run ended before too."""
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise IndexError(pos)


def decode_compact_string(data: memoryview, pos: int) -> tuple[str | None, int]:
    """The compact nullable string at ``pos`` (its length + 1 as an unsigned varint, 0 for null, then
    its UTF-8 bytes) of an answer the wire reads from its bytes, and the position after it."""
    length, pos = decode_uvarint(data, pos)
    if length == 0:
        return None, pos
    end = pos + length - 1
    return str(data[pos:end], "utf-8"), end


def decode_zigzag_varint(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    """The zigzag varint (a record's varint or varlong) at ``pos``, as kafka-python's ``decode_varint``
    reads it, and the position after it: :func:`decode_uvarint`'s bits, zigzag-decoded."""
    value, pos = decode_uvarint(data, pos)
    return (value >> 1) ^ -(value & 1), pos
