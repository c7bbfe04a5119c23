"""A writer of flexible-version Kafka answers, field by field, for the tests of the wire's readers:
compact (nullable) strings and arrays, integers, tagged-field sections."""

from __future__ import annotations

import struct

from kafkatxn.kafka.varint import encode_uvarint


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def s(v: str | None) -> bytes:
    """COMPACT_(NULLABLE_)STRING."""
    if v is None:
        return b"\x00"
    raw = v.encode()
    return encode_uvarint(len(raw) + 1) + raw


def arr(items: list[bytes]) -> bytes:
    return encode_uvarint(len(items) + 1) + b"".join(items)


def tags(*fields: tuple[int, bytes]) -> bytes:
    """A tagged-field section: fields no reader here knows (tag, bytes), skipped by their size."""
    return encode_uvarint(len(fields)) + b"".join(encode_uvarint(t) + encode_uvarint(len(b)) + b for t, b in fields)
