"""Request bodies the wire writes itself, byte for byte what kafka-python's ``encode`` writes, and
the answers it reads itself, to what its decoders make of kafka-python's objects.

A per-leader ListOffsets over 10,000 partitions costs kafka-python a protocol object per partition
to build and a Python call per partition to encode (its tagged fields): 40-50 ms a request, six a
pass at 30,000 partitions on 3 brokers, on the IO thread before the last one goes out; more than
the broker takes to answer it. Written here, a topic's partitions go out in one ``bytes.join``
(2-3 ms a request). (DescribeProducers needs none: kafka-python encodes its partition indexes, a
plain int32 array, as fast.) :class:`~kafkatxn.kafka.wire.client.Wire` sends a kafka-python
request with no topics (for its API key, versions, header and response class) whose body is the
one written here at the version the connection picks; ``tests/unit/test_wire_contract.py``
compares these bytes with kafka-python's at every version each request may go out at.

The answers to those requests are as costly to decode: an object per partition on kafka-python's IO
thread, then a named tuple per partition by the wire's decoder (about 19 ms per 10,000 partitions).
:func:`read_list_offsets` makes the typed answer from the bytes (the partitions of a flexible answer
are fixed-size records: ``struct.iter_unpack``); an answer it does not read (an old version, a
partition with tagged fields) is decoded by kafka-python as before. The test compares its answers
with the wire's decoder over kafka-python's, at every version.
"""

from __future__ import annotations

import struct
from itertools import repeat
from typing import Any

from kafkatxn.kafka import protocol as p
from kafkatxn.kafka.wire.names import error_names, made
from kafkatxn.kafka.wire.offsets import EARLIEST, LATEST
from kafkatxn.model import TopicPartition

_INT8 = struct.Struct(">b").pack
_INT16 = struct.Struct(">h").pack
_INT32 = struct.Struct(">i").pack
_INT64 = struct.Struct(">q").pack
NO_TAGGED_FIELDS = b"\x00"


def uvarint(n: int) -> bytes:
    """Kafka's unsigned varint (the lengths of flexible versions' compact arrays and strings)."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def array_length(n: int, flexible: bool) -> bytes:
    return uvarint(n + 1) if flexible else _INT32(n)


def string(value: str, flexible: bool) -> bytes:
    raw = value.encode("utf-8")
    return (uvarint(len(raw) + 1) if flexible else _INT16(len(raw))) + raw


# -- ListOffsets (ListOffsetsRequest.json: versions 1-11 sent, flexible from 6) -----------------------

LIST_OFFSETS_FLEXIBLE = 6


def list_offsets_shell(request: p.ListOffsets) -> Any:
    """``request`` as kafka-python's ListOffsetsRequest without its topics: what the connection needs
    of it (API key, the versions it may go out at, header, response class); the body is
    :func:`list_offsets_body`'s."""
    from kafka.protocol.consumer.offsets import ListOffsetsRequest

    return ListOffsetsRequest(
        replica_id=-1, isolation_level=1 if request.read_committed else 0, topics=[],
        min_version=2 if request.read_committed else 1,  # isolation levels came with v2
    )


def list_offsets_body(request: p.ListOffsets, version: int) -> bytes:
    flexible = version >= LIST_OFFSETS_FLEXIBLE
    # After each partition's index, the same bytes: CurrentLeaderEpoch -1 (v4+), the timestamp,
    # MaxNumOffsets 1 (v0), its tagged fields (none).
    after_index = (
        (_INT32(-1) if version >= 4 else b"")
        + _INT64(EARLIEST if request.earliest else LATEST)
        + (_INT32(1) if version == 0 else b"")
        + (NO_TAGGED_FIELDS if flexible else b"")
    )
    topics = p.by_topic(request.partitions)
    out = [_INT32(-1)]  # ReplicaId: a consumer
    if version >= 2:
        out.append(_INT8(1 if request.read_committed else 0))
    out.append(array_length(len(topics), flexible))
    for name, indexes in topics.items():
        out.append(string(name, flexible))
        out.append(array_length(len(indexes), flexible))
        if indexes:
            out.append(after_index.join(map(_INT32, indexes)))
            out.append(after_index)
        if flexible:
            out.append(NO_TAGGED_FIELDS)
    if version >= 10:
        out.append(_INT32(0))  # TimeoutMs: kafka-python's default (no tiered-storage wait)
    if flexible:
        out.append(NO_TAGGED_FIELDS)
    return b"".join(out)


def _read_uvarint(data: memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


_THROTTLE = struct.Struct(">i")
# A flexible answer's partition: PartitionIndex, ErrorCode, Timestamp, Offset, LeaderEpoch, and the
# count of its tagged fields (a one-byte varint; 0 when it has none).
_LIST_OFFSETS_PARTITION = struct.Struct(">ihqqiB")


def read_list_offsets(data: memoryview, version: int) -> tuple[p.ListOffsetsResponse, int] | None:
    """A ListOffsets answer's body (after the response header): the typed answer and its throttle
    time, or None where it is not read here (before v6, or tagged fields anywhere): kafka-python's."""
    if version < LIST_OFFSETS_FLEXIBLE:
        return None
    size = _LIST_OFFSETS_PARTITION.size
    (throttle_ms,) = _THROTTLE.unpack_from(data, 0)
    topics, pos = _read_uvarint(data, 4)
    out: list[p.PartitionOffset] = []
    for _ in range(topics - 1):
        length, pos = _read_uvarint(data, pos)
        name = str(data[pos : pos + length - 1], "utf-8")
        pos += length - 1
        count, pos = _read_uvarint(data, pos)
        count -= 1
        block = bytes(data[pos : pos + count * size])
        pos += count * size
        if len(block) != count * size or block[size - 1 :: size].count(0) != count or data[pos] != 0:
            return None  # a partition or the topic with tagged fields
        pos += 1
        if count:
            indexes, errors, _timestamps, offsets, _epochs, _tags = zip(*_LIST_OFFSETS_PARTITION.iter_unpack(block))
            tps = made(TopicPartition, zip(repeat(name), indexes))
            out.extend(made(p.PartitionOffset, zip(tps, error_names(errors), offsets)))
    if pos != len(data) - 1 or data[pos] != 0:
        return None  # tagged fields at the top level (or bytes this does not know)
    return p.ListOffsetsResponse(tuple(out)), throttle_ms


# The answers read here, by the request type.
READERS = {p.ListOffsets: read_list_offsets}

# type -> (the kafka-python request without its partitions, the body at a version)
WRITERS = {
    p.ListOffsets: (list_offsets_shell, list_offsets_body),
}
