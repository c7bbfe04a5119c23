"""Kafka's varints and compact strings as the wire reads them from an answer's bytes."""

from __future__ import annotations

import pytest

from kafkatxn.kafka.varint import decode_compact_string, decode_uvarint, decode_zigzag_varint, encode_uvarint


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


def test_a_zigzag_varint_past_ten_bytes_is_refused():
    with pytest.raises(IndexError):
        decode_zigzag_varint(b"\xff" * 11, 0)
    assert decode_zigzag_varint(b"\x03", 0) == (-2, 1)
