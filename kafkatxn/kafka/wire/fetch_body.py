"""A Fetch request's body written by the wire, byte for byte what kafka-python's ``encode`` writes
(v4 to v12: :data:`~kafkatxn.kafka.wire.fetch.MIN_VERSION`, :data:`~kafkatxn.kafka.wire.fetch.MAX_VERSION`).

kafka-python builds a protocol object per partition and per topic and, the first time a process
encodes a FetchRequest, generates and compiles its encoder (~30 M instructions, 10-15 ms: a sixth of
what ``lso`` and ``check`` spend on the Fetch of a pinning transaction's first record). Here a topic's
partitions are one ``bytes.join``; the request sent is kafka-python's FetchRequest without topics
(:func:`fetch_shell`: its API key, the versions it may go out at, its header and answer class), its
body this module's at the version the connection picks. ``tests/unit/test_fetch_body.py`` compares
the bytes with kafka-python's at every version.
"""

from __future__ import annotations

import struct
from typing import Any

from kafkatxn.kafka import protocol as p
from kafkatxn.kafka.varint import encode_uvarint
from kafkatxn.kafka.wire.fetch import MAX_VERSION, MIN_VERSION

_FLEXIBLE = 12  # FetchRequest.json: flexibleVersions 12+
_INT8 = struct.Struct(">b").pack
_INT16 = struct.Struct(">h").pack
_INT32 = struct.Struct(">i").pack
_INT64 = struct.Struct(">q").pack
_NO_TAGGED_FIELDS = b"\x00"


def fetch_shell(request: p.Fetch) -> Any:
    """``request`` as kafka-python's FetchRequest without its topics; the body is :func:`fetch_body`'s."""
    from kafka.protocol.consumer.fetch import FetchRequest

    return FetchRequest(
        replica_id=-1, max_wait_ms=request.max_wait_ms, min_bytes=1, max_bytes=request.max_bytes,
        isolation_level=1 if request.read_committed else 0, session_id=0, session_epoch=-1, topics=[],
        forgotten_topics_data=[], rack_id="", min_version=MIN_VERSION, max_version=MAX_VERSION,
    )


def _length(n: int, flexible: bool) -> bytes:
    return encode_uvarint(n + 1) if flexible else _INT32(n)


def _string(value: str, flexible: bool) -> bytes:
    raw = value.encode("utf-8")
    return (encode_uvarint(len(raw) + 1) if flexible else _INT16(len(raw))) + raw


def fetch_body(request: p.Fetch, version: int) -> bytes:
    """The fields of FetchRequest.json at ``version``, as :func:`kafkatxn.kafka.wire.fetch._fetch` fills
    kafka-python's: a plain consumer's full fetch (replica -1, no session, no rack, no forgotten topics),
    each partition from its offset, its topics in the order they first come."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"a Fetch body is written here at v{MIN_VERSION}-v{MAX_VERSION} (v{version})")
    flexible = version >= _FLEXIBLE
    out = [_INT32(-1), _INT32(request.max_wait_ms), _INT32(1), _INT32(request.max_bytes), _INT8(1 if request.read_committed else 0)]
    if version >= 7:
        out += (_INT32(0), _INT32(-1))  # SessionId, SessionEpoch: no fetch session
    by_topic: dict[str, list[p.FetchOffset]] = {}
    for part in request.partitions:
        by_topic.setdefault(part.tp.topic, []).append(part)
    # Around each partition's FetchOffset: CurrentLeaderEpoch -1 (v9+) before it; LastFetchedEpoch -1
    # (v12+) and LogStartOffset -1 (v5+) after it, then its PartitionMaxBytes and (v12+) no tagged fields.
    epoch = _INT32(-1) if version >= 9 else b""
    after_offset = (_INT32(-1) if version >= 12 else b"") + (_INT64(-1) if version >= 5 else b"")
    tail = _NO_TAGGED_FIELDS if flexible else b""
    default_max = request.partition_max_bytes
    out.append(_length(len(by_topic), flexible))
    for name, parts in by_topic.items():
        out += (_string(name, flexible), _length(len(parts), flexible))
        out += [b"".join((_INT32(f.tp.partition), epoch, _INT64(f.offset), after_offset, _INT32(f.max_bytes or default_max), tail))
                for f in parts]
        if flexible:
            out.append(_NO_TAGGED_FIELDS)
    if version >= 7:
        out.append(_length(0, flexible))  # ForgottenTopicsData: none
    if version >= 11:
        out.append(_string("", flexible))  # RackId
    if flexible:
        out.append(_NO_TAGGED_FIELDS)  # ClusterId (tagged) left at its default, null: not written
    return b"".join(out)
