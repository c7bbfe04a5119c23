"""Encoder for ``__transaction_state`` keys and values (tests and benchmarks; the broker is the only
real writer), the inverse of :mod:`kafkatxn.kafka.txnlog`, whose module docstring gives the format."""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping

from kafkatxn.kafka.txnlog import (
    _FIXED, _I16, _I32, _I64, _KEY_HEAD, _KNOWN_TAGS, _STATE_IDS, _TIMES, KEY_VERSION, STATES,
    TAG_CLIENT_TRANSACTION_VERSION, TAG_NEXT_PRODUCER_EPOCH, TAG_NEXT_PRODUCER_ID, TAG_PREVIOUS_PRODUCER_ID,
)
from kafkatxn.kafka.varint import encode_uvarint

__all__ = ["encode_key", "encode_value_v0", "encode_value_v1"]


def _status_id(state: int | str) -> int:
    if isinstance(state, str):
        try:
            return _STATE_IDS[state]
        except KeyError:
            raise ValueError(f"unknown transaction state {state!r}; expected one of {', '.join(STATES)}") from None
    return int(state)


PartitionsArg = Mapping[str, Iterable[int]] | Iterable[str] | None


def _group_partitions(partitions: PartitionsArg) -> list[tuple[str, list[int]]] | None:
    """None (a null array) or [(topic, [partition, ...]), ...] in the caller's order."""
    if partitions is None:
        return None
    if isinstance(partitions, (str, bytes)):
        raise TypeError("partitions must be a mapping topic -> partition ids or an iterable of 'topic-partition'")
    if isinstance(partitions, Mapping):
        return [(topic, [int(p) for p in ids]) for topic, ids in partitions.items()]
    grouped: dict[str, list[int]] = {}
    for tp in partitions:
        topic, sep, p = tp.rpartition("-")
        if not sep or not topic:
            raise ValueError(f"not a 'topic-partition' string: {tp!r}")
        grouped.setdefault(topic, []).append(int(p))
    return list(grouped.items())


def encode_key(transactional_id: str) -> bytes:
    """The version 0 key for ``transactional_id``."""
    raw = transactional_id.encode("utf-8")
    if len(raw) > 0x7FFF:
        raise ValueError("transactional id longer than 32767 bytes")
    return _KEY_HEAD.pack(KEY_VERSION, len(raw)) + raw


def _pack_fixed(producer_id: int, producer_epoch: int, timeout_ms: int, state: int | str) -> bytes:
    try:
        return _FIXED.pack(producer_id, producer_epoch, timeout_ms, _status_id(state))
    except struct.error as e:
        raise ValueError(f"value field out of range: {e}") from None


def _pack_times(last_update_timestamp_ms: int, start_timestamp_ms: int) -> bytes:
    try:
        return _TIMES.pack(last_update_timestamp_ms, start_timestamp_ms)
    except struct.error as e:
        raise ValueError(f"timestamp out of range: {e}") from None


def encode_value_v0(
    *, producer_id: int, producer_epoch: int, timeout_ms: int, state: int | str, partitions: PartitionsArg,
    last_update_timestamp_ms: int, start_timestamp_ms: int,
) -> bytes:
    """A version 0 (non-flexible) value. ``partitions`` None writes a null array, as Kafka does for Empty."""
    out = [_I16.pack(0), _pack_fixed(producer_id, producer_epoch, timeout_ms, state)]
    grouped = _group_partitions(partitions)
    if grouped is None:
        out.append(_I32.pack(-1))
    else:
        out.append(_I32.pack(len(grouped)))
        for topic, ids in grouped:
            raw = topic.encode("utf-8")
            out.append(_I16.pack(len(raw)))
            out.append(raw)
            out.append(struct.pack(f">i{len(ids)}i", len(ids), *ids))
    out.append(_pack_times(last_update_timestamp_ms, start_timestamp_ms))
    return b"".join(out)


def encode_value_v1(
    *,
    producer_id: int,
    producer_epoch: int,
    timeout_ms: int,
    state: int | str,
    partitions: PartitionsArg,
    last_update_timestamp_ms: int,
    start_timestamp_ms: int,
    previous_producer_id: int = -1,
    next_producer_id: int = -1,
    client_transaction_version: int = 0,
    next_producer_epoch: int = -1,
    extra_tagged_fields: Mapping[int, bytes] | None = None,
) -> bytes:
    """A version 1 (flexible) value.

    Like Kafka's generated writer, known tagged fields are written only when they differ from
    their defaults. ``extra_tagged_fields`` (tag -> raw bytes) adds fields this schema does not
    know, e.g. to test that readers skip them; a known tag there is a ValueError. Tags are
    written in ascending order, as Kafka requires.
    """
    out = [_I16.pack(1), _pack_fixed(producer_id, producer_epoch, timeout_ms, state)]
    grouped = _group_partitions(partitions)
    if grouped is None:
        out.append(b"\x00")
    else:
        out.append(encode_uvarint(len(grouped) + 1))
        for topic, ids in grouped:
            raw = topic.encode("utf-8")
            out.append(encode_uvarint(len(raw) + 1))
            out.append(raw)
            out.append(encode_uvarint(len(ids) + 1))
            out.append(struct.pack(f">{len(ids)}i", *ids))
            out.append(b"\x00")  # no tagged fields in the partition entry
    out.append(_pack_times(last_update_timestamp_ms, start_timestamp_ms))

    tagged: dict[int, bytes] = {}
    try:
        if previous_producer_id != -1:
            tagged[TAG_PREVIOUS_PRODUCER_ID] = _I64.pack(previous_producer_id)
        if next_producer_id != -1:
            tagged[TAG_NEXT_PRODUCER_ID] = _I64.pack(next_producer_id)
        if client_transaction_version != 0:
            tagged[TAG_CLIENT_TRANSACTION_VERSION] = _I16.pack(client_transaction_version)
        if next_producer_epoch != -1:
            tagged[TAG_NEXT_PRODUCER_EPOCH] = _I16.pack(next_producer_epoch)
    except struct.error as e:
        raise ValueError(f"tagged field out of range: {e}") from None
    for tag, raw in (extra_tagged_fields or {}).items():
        if tag in _KNOWN_TAGS:
            raise ValueError(f"tag {tag} is a known TransactionLogValue field; pass it by name")
        if tag < 0:
            raise ValueError(f"negative tag {tag}")
        tagged[tag] = bytes(raw)
    out.append(encode_uvarint(len(tagged)))
    for tag in sorted(tagged):
        raw = tagged[tag]
        out.append(encode_uvarint(tag))
        out.append(encode_uvarint(len(raw)))
        out.append(raw)
    return b"".join(out)
