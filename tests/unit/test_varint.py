"""Kafka's varints and compact strings as the wire reads them from an answer's bytes."""

from __future__ import annotations

import pytest

from kafkatxn.kafka.varint import (
    decode_compact_string,
    decode_uvarint,
    decode_zigzag_varint,
    encode_uvarint,
)


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 16_383, 16_384, 2**31 - 1, 2**35])
def test_an_unsigned_varint_reads_back_what_was_written_and_where_it_ends(value):
    data = memoryview(b"\xff" + encode_uvarint(value) + b"\xee")
    assert decode_uvarint(data, 1) == (value, len(data) - 1)


@pytest.mark.parametrize("text", ["", "g", "orders-é-注文", "x" * 127, "y" * 200])
def test_a_compact_string_is_its_utf8_after_its_length_plus_one(text):
    raw = text.encode()
    data = memoryview(b"\x00\x07" + encode_uvarint(len(raw) + 1) + raw + b"\x01")
    assert decode_compact_string(data, 2) == (text, len(data) - 1)


def test_a_null_compact_string_is_none_and_one_byte():
    assert decode_compact_string(memoryview(b"\x00\x05"), 0) == (None, 1)


@pytest.mark.parametrize("decode", [decode_uvarint, decode_zigzag_varint])
def test_a_varint_past_ten_bytes_is_refused_and_ten_are_read(decode):
    with pytest.raises(IndexError):
        decode(b"\xff" * 10 + b"\x01", 0)  # ends, but past a varlong's ten bytes
    assert decode(b"\xff" * 9 + b"\x01", 0)[1] == 10


@pytest.mark.parametrize("value", [0, -1, 1, -2**63, 2**63 - 1, 300, -300])
def test_a_zigzag_varint_is_the_unsigned_one_zigzag_decoded(value):
    zigzag = (value << 1) ^ (value >> 63)
    assert decode_zigzag_varint(encode_uvarint(zigzag), 0) == (value, len(encode_uvarint(zigzag)))
