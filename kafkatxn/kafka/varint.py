"""Kafka's unsigned varint, written: the lengths of flexible versions' compact arrays and strings,
and the counts and tags of tagged fields, in the requests the wire writes
(:mod:`kafkatxn.kafka.wire.bodies`) and in the ``__transaction_state`` records the tests write
(:mod:`kafkatxn.kafka.txnlog_encode`)."""

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
