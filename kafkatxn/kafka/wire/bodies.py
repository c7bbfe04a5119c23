"""Request bodies the wire writes itself, byte for byte what kafka-python's ``encode`` writes, and
the answers it reads itself, to what its decoders make of kafka-python's objects.

A per-leader ListOffsets over 10,000 partitions costs kafka-python a protocol object per partition
to build and a Python call per partition to encode (its tagged fields): 40-50 ms a request, six a
pass at 30,000 partitions on 3 brokers, on the IO thread before the last one goes out; more than
the broker takes to answer it. Written here, a topic's partitions go out in one ``bytes.join``
(2-3 ms a request); DescribeProducers' too (kafka-python builds an object per topic first: 12-15 ms
per 10,000 partitions against 1-2 here). :class:`~kafkatxn.kafka.wire.client.Wire` sends a kafka-python
request with no topics (for its API key, versions, header and response class) whose body is the
one written here at the version the connection picks; ``tests/unit/test_wire_contract.py``
compares these bytes with kafka-python's at every version each request may go out at.

The answers to those requests, and Metadata's (every partition, with its replica lists), are as
costly to decode: objects per partition on kafka-python's IO thread, then a named tuple per partition
by the wire's decoder (ListOffsets ~19 ms per 10,000 partitions; Metadata 60 ms at 30,000 partitions
of one replica, 210 ms of three; DescribeProducers 32 ms per 10,000). :func:`read_list_offsets` (into
columns), :func:`read_metadata` and :func:`.producers_answers.read_describe_producers` make the typed answer from the bytes
(a flexible answer's partitions are fixed-size records, a topic's all alike where their replica lists or
producer counts are); an answer they do not read (an old version, tagged fields) is kafka-python's to
decode, as before. A ListOffsets answer is read by :mod:`.offsets_layout`, with no Python step per topic
where it is laid out as one read before. The tests compare them with the wire's decoders over kafka-python's, at every version;
so does :mod:`.group_answers`' reader of a batched OffsetFetch (100,000 committed offsets at 5,000
groups x 20: 0.4-0.6 s of kafka-python's objects before ``lso --groups``, ``diagnose``, ``check --groups`` or a scrape).
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from collections.abc import Callable, Iterable
from itertools import chain, islice, repeat
from operator import add, itemgetter, lt
from typing import Any

from kafkatxn.kafka import protocol as p
from kafkatxn.kafka.varint import decode_compact_string as _compact_string
from kafkatxn.kafka.varint import decode_uvarint as _read_uvarint
from kafkatxn.kafka.varint import encode_uvarint
from kafkatxn.kafka.wire import offsets_layout
from kafkatxn.kafka.wire.codecs import ByRequestType, wire_module
from kafkatxn.kafka.wire.metadata_codec import metadata_body, metadata_shell
from kafkatxn.kafka.wire.names import error_name
from kafkatxn.kafka.wire.offsets_codec import EARLIEST, LATEST
from kafkatxn.metadata_columns import MetadataColumns, TopicRun, made_partitions
from kafkatxn.model import INTERNAL_TOPICS, BrokerInfo, PartitionInfo, TopicPartition

_INT8 = struct.Struct(">b").pack
_INT16 = struct.Struct(">h").pack
_INT32 = struct.Struct(">i").pack
_INT64 = struct.Struct(">q").pack
NO_TAGGED_FIELDS = b"\x00"


def array_length(n: int, flexible: bool) -> bytes:
    return encode_uvarint(n + 1) if flexible else _INT32(n)


def string(value: str, flexible: bool) -> bytes:
    raw = value.encode("utf-8")
    return (encode_uvarint(len(raw) + 1) if flexible else _INT16(len(raw))) + raw


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
    head = _INT32(-1)  # ReplicaId: a consumer
    if version >= 2:
        head += _INT8(1 if request.read_committed else 0)
    return head + _list_offsets_topics(request.partitions, request.earliest, version)


# The two isolation levels' requests to a leader name the same partitions: what follows the isolation
# level is written once for both (6 bodies of 10,000 partitions a pass at 30,000 partitions on 3
# brokers). The last few kept, found by equality (no hash of 10,000 partitions per look-up).
_WRITTEN_TOPICS: list[tuple[tuple[TopicPartition, ...], bool, int, bytes]] = []
WRITTEN_TOPICS_KEPT = 4


def _list_offsets_topics(partitions: tuple[TopicPartition, ...], earliest: bool, version: int) -> bytes:
    for kept in reversed(_WRITTEN_TOPICS):
        if kept[1] == earliest and kept[2] == version and (kept[0] is partitions or kept[0] == partitions):
            return kept[3]
    flexible = version >= LIST_OFFSETS_FLEXIBLE
    # After each partition's index, the same bytes: CurrentLeaderEpoch -1 (v4+), the timestamp,
    # MaxNumOffsets 1 (v0), its tagged fields (none).
    after_index = (
        (_INT32(-1) if version >= 4 else b"")
        + _INT64(EARLIEST if earliest else LATEST)
        + (_INT32(1) if version == 0 else b"")
        + (NO_TAGGED_FIELDS if flexible else b"")
    )
    runs = getattr(partitions, "runs", None)  # each topic's partition numbers, as the metadata's columns grouped them
    out = _topics_of_runs(runs, after_index, flexible) if runs else _topics_in_runs(partitions, after_index, flexible)
    if out is None:  # topics not in sorted runs: not as the facade sends them
        topics = p.by_topic(partitions)
        out = [array_length(len(topics), flexible)]
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
    written = b"".join(out)
    _WRITTEN_TOPICS.append((partitions, earliest, version, written))
    del _WRITTEN_TOPICS[:-WRITTEN_TOPICS_KEPT]
    return written


# A ListOffsets partition as written (its index, then the bytes after every index), by those bytes
# (the version and the timestamp decide them) and the partition number: a request's 10,000 partitions
# are 10,000 look-ups and one join, not a pack each (at most a topic's partition count kept per kind).
_PARTITIONS_WRITTEN: dict[bytes, dict[int, bytes]] = {}


def _topics_of_runs(runs: list[tuple[str, tuple[int, ...]]], after_index: bytes, flexible: bool) -> list[bytes]:
    """The topics of a ListOffsets request as :func:`_topics_in_runs` writes them, from each topic's name and
    partition numbers (``metadata_columns.LeaderRuns.runs``: its partitions, in their order): no
    partition taken apart nor compared again, and no Python step per topic (:func:`_lengths`)."""
    written = _PARTITIONS_WRITTEN.setdefault(after_index, {})
    numbers = list(map(itemgetter(1), runs))
    new = set(chain.from_iterable(numbers)).difference(written)  # partition numbers not written before
    if new:
        written.update((i, _INT32(i) + after_index) for i in new)
    names = list(map(str.encode, map(itemgetter(0), runs)))
    heads = map(add, _lengths(list(map(len, names)), flexible, _INT16), names)
    counts = _lengths(list(map(len, numbers)), flexible, _INT32)
    bodies = map(b"".join, map(map, repeat(written.__getitem__), numbers))
    topics = zip(heads, counts, bodies, repeat(NO_TAGGED_FIELDS)) if flexible else zip(heads, counts, bodies)
    return [array_length(len(runs), flexible), *chain.from_iterable(topics)]


def _lengths(lengths: list[int], flexible: bool, fixed: Callable[[int], bytes]) -> Iterable[bytes]:
    """Each of ``lengths`` as a string's or an array's length is written, in C: a compact one's (the length
    + 1, a varint: one byte under 127, the usual case) or, not flexible, by ``fixed`` (int16, int32)."""
    if not flexible:
        return map(fixed, lengths)
    if not lengths or max(lengths) < 127:
        return map(int.to_bytes, map((1).__add__, lengths))  # one byte, big-endian: the varint's
    return map(encode_uvarint, map((1).__add__, lengths))


def _topics_in_runs(partitions: tuple[TopicPartition, ...], after_index: bytes, flexible: bool) -> list[bytes] | None:
    """The topics of a ListOffsets request as :func:`_list_offsets_topics` writes them, when ``partitions``
    come a topic at a time in topic order (the facade's requests): the names and indexes taken apart
    in C, each topic's run found by bisection (a Python step per topic, not per partition) and its
    partitions' bytes looked up. None otherwise."""
    if not partitions:
        return None
    names, indexes = zip(*partitions)
    written = _PARTITIONS_WRITTEN.setdefault(after_index, {})
    out = [b""]  # the topic count, known at the end
    start, count, last, topics = 0, len(names), "", 0
    while start < count:
        name = names[start]
        end = bisect_right(names, name, start)
        # Each run one topic, the topics strictly increasing: the order the topics are written in is
        # theirs, and no topic comes twice (as p.by_topic would group them).
        if (topics and name <= last) or names[start:end].count(name) != end - start:
            return None
        run = indexes[start:end]
        try:
            body = b"".join(map(written.__getitem__, run))
        except KeyError:  # partition numbers not written before
            written.update((i, _INT32(i) + after_index) for i in run if i not in written)
            body = b"".join(map(written.__getitem__, run))
        out += (string(name, flexible), array_length(end - start, flexible), body)
        if flexible:
            out.append(NO_TAGGED_FIELDS)
        start, last, topics = end, name, topics + 1
    out[0] = array_length(topics, flexible)
    return out


# -- DescribeProducers (DescribeProducersRequest.json: version 0, flexible) ---------------------------


def describe_producers_shell(request: p.DescribeProducers) -> Any:
    """``request`` as kafka-python's DescribeProducersRequest without its topics (see
    :func:`list_offsets_shell`); the body is :func:`describe_producers_body`'s."""
    from kafka.protocol.admin.transactions import DescribeProducersRequest

    return DescribeProducersRequest(topics=[])


def describe_producers_body(request: p.DescribeProducers, version: int) -> bytes:
    # Flexible at every version: compact arrays and strings, an empty tagged-field count per topic
    # and at the end. kafka-python builds an object per topic and a list per request (12 ms per
    # 10,000 partitions, before it encodes them); a topic's indexes here are one struct.pack. A leader's
    # topics' runs (``metadata_columns.LeaderRuns.runs``, cut into its batches) are the topics as they are.
    runs = getattr(request.partitions, "runs", None)
    topics = runs if runs is not None else p.by_topic(request.partitions).items()
    out = [array_length(len(topics), True)]
    for name, indexes in topics:
        out.append(string(name, True))
        out.append(array_length(len(indexes), True))
        out.append(struct.pack(f">{len(indexes)}i", *indexes))
        out.append(NO_TAGGED_FIELDS)
    out.append(NO_TAGGED_FIELDS)
    return b"".join(out)


_THROTTLE = struct.Struct(">i")
_TOPIC_LAYOUTS: dict[tuple[str, int], struct.Struct] = {}


def _topic_layout(layout: struct.Struct, count: int) -> struct.Struct:
    """``count`` partitions of ``layout`` in a row, kept (a cluster has a few layouts and counts): the
    memory they hold is at most the cluster's partitions."""
    key = (layout.format, count)
    topic = _TOPIC_LAYOUTS.get(key)
    if topic is None:
        topic = _TOPIC_LAYOUTS[key] = struct.Struct(">" + layout.format[1:] * count)
    return topic


def read_list_offsets(data: memoryview, version: int) -> tuple[p.ListOffsetsResponse, int] | None:
    """A ListOffsets answer's body (after the response header): the typed answer (its partitions as
    :class:`~kafkatxn.kafka.protocol.OffsetColumns`, read by :mod:`.offsets_layout`: its columns taken
    out of the bytes in C, no Python step per partition) and its throttle time, or None where it is not
    read here (before v6, or tagged fields anywhere): kafka-python's."""
    if version < LIST_OFFSETS_FLEXIBLE:
        return None
    read = offsets_layout.read(data)
    if read is None:
        return None
    tps, codes, offsets, throttle_ms = read
    names = tuple(map(error_name, codes)) if any(codes) else (None,) * len(codes)  # usually: none failed
    return p.ListOffsetsResponse(p.OffsetColumns(tps, names, tuple(offsets))), throttle_ms


# The Metadata versions read here: flexible, with nullable topic names (v12, Kafka 3.x; v13, 4.x).
METADATA_READ_FROM = 12
_PARTITION_HEAD = struct.Struct(">hiii")  # ErrorCode, PartitionIndex, LeaderId, LeaderEpoch
_INDEX, _LEADER = itemgetter(1), itemgetter(2)  # a PartitionInfo's partition number, its leader
_PARTITION_LAYOUTS: dict[tuple[int, int], struct.Struct] = {}


def _partition_layout(replicas: int, isr: int) -> struct.Struct:
    """A Metadata partition with ``replicas`` replicas, ``isr`` in sync, none offline and no tagged
    fields: the head, each list's count (its length + 1, one byte under 127) and its broker ids. Unpacked:
    the index, the leader, the replicas and those in sync (the rest skipped as padding; the counts are
    checked on the bytes)."""
    layout = _PARTITION_LAYOUTS.get((replicas, isr))
    if layout is None:
        layout = _PARTITION_LAYOUTS[(replicas, isr)] = struct.Struct(f">2xii4xx{replicas}ix{isr}i2x")
    return layout


def _partitions_one_by_one(data: memoryview, pos: int, count: int, name: str, internal: bool,
                           out: list[PartitionInfo]) -> int | None:
    """A topic's partitions read one at a time (their replica lists differ in length, or some are
    offline); None where one has tagged fields."""
    for _ in range(count):
        _error, index, leader, _epoch = _PARTITION_HEAD.unpack_from(data, pos)
        pos += _PARTITION_HEAD.size
        lists = []
        for _list in range(3):  # replicas, in-sync replicas, offline replicas
            n, pos = _read_uvarint(data, pos)
            if n == 0:
                return None  # a null list: not what the schema allows
            lists.append(struct.unpack_from(f">{n - 1}i", data, pos))
            pos += 4 * (n - 1)
        if data[pos] != 0:
            return None
        pos += 1
        out.append(PartitionInfo(name, index, leader, lists[0], lists[1], internal))
    return pos


def read_metadata(data: memoryview, version: int) -> tuple[p.MetadataResponse, int] | None:
    """A Metadata answer's body: what the wire's decoder makes of kafka-python's (brokers by id, every
    partition with its leader, replicas and in-sync replicas) and its throttle time, or None where it
    is not read here (before v12, tagged fields, a null topic name): kafka-python's. Its partitions are
    :class:`~kafkatxn.metadata_columns.MetadataColumns` (each topic's partition numbers and leaders, its
    PartitionInfos made on first use) where Kafka's order holds (each topic once, its partitions in order),
    else the PartitionInfos in the answer's order (the session orders them)."""
    if version < METADATA_READ_FROM:
        return None
    (throttle_ms,) = _THROTTLE.unpack_from(data, 0)
    count, pos = _read_uvarint(data, 4)
    brokers = []
    for _ in range(count - 1):
        (node_id,) = _THROTTLE.unpack_from(data, pos)
        host, pos = _compact_string(data, pos + 4)
        (port,) = _THROTTLE.unpack_from(data, pos)
        rack, pos = _compact_string(data, pos + 4)
        if host is None or data[pos] != 0:
            return None
        pos += 1
        brokers.append(BrokerInfo(node_id, host, port, rack))
    cluster_id, pos = _compact_string(data, pos)
    (controller_id,) = _THROTTLE.unpack_from(data, pos)
    topics, pos = _read_uvarint(data, pos + 4)
    runs: list[TopicRun] = []  # each topic's partitions, in the answer's order
    for _ in range(topics - 1):
        name, pos = _compact_string(data, pos + 2)  # after the topic's ErrorCode
        pos += 17  # TopicId (a UUID), IsInternal
        count, pos = _read_uvarint(data, pos)
        count -= 1
        if name is None:
            return None
        internal = name in INTERNAL_TOPICS
        if count > 0:
            replicas, at = data[pos + 14] - 1, pos + 15 + 4 * (data[pos + 14] - 1)
            isr = data[at] - 1
            layout = _partition_layout(replicas, isr) if 0 <= replicas < 0x7F and 0 <= isr < 0x7F else None
            size = layout.size if layout is not None else 0
            block = bytes(data[pos : pos + count * size]) if layout is not None else b""
            # Every partition of the topic like its first (as many replicas and in sync, none offline,
            # no tagged fields): read in C, its columns taken apart by slices (no tuple per partition).
            # Else one at a time.
            if (layout is not None and len(block) == count * size and block[14::size].count(replicas + 1) == count
                    and block[15 + 4 * replicas :: size].count(isr + 1) == count
                    and block[size - 2 :: size].count(1) == count and block[size - 1 :: size].count(0) == count):
                width = 2 + replicas + isr
                fields = _topic_layout(layout, count).unpack(block)
                runs.append(TopicRun(name, fields[0::width], fields[1::width], internal, None, fields, width, replicas, isr, block))
                pos += count * size
            else:
                one_by_one: list[PartitionInfo] = []
                pos = _partitions_one_by_one(data, pos, count, name, internal, one_by_one)
                if pos is None:
                    return None
                made = tuple(one_by_one)
                runs.append(TopicRun(name, tuple(map(_INDEX, made)), tuple(map(_LEADER, made)), internal, made))
        pos += 4  # TopicAuthorizedOperations
        if data[pos] != 0:
            return None
        pos += 1
    if version >= 13:
        pos += 2  # the answer's ErrorCode (the wire's decoder does not read it either)
    if pos != len(data) - 1 or data[pos] != 0:
        return None
    brokers.sort(key=lambda b: b.id)
    return p.MetadataResponse(cluster_id, -1 if controller_id is None else controller_id, tuple(brokers), _in_topic_order(runs)), throttle_ms


def _in_topic_order(runs: list[TopicRun]) -> MetadataColumns | tuple[PartitionInfo, ...]:
    """``runs`` in topic order (:class:`MetadataColumns`) where no topic comes twice and each topic's
    partitions are in order (checked in C); else their PartitionInfos in the answer's order."""
    by_name = {run.name: run for run in runs}
    if len(by_name) != len(runs) or not all(map(_in_order, runs)):
        return tuple(chain.from_iterable(made_partitions(runs, keep=False)))
    return MetadataColumns([by_name[name] for name in sorted(by_name)])


_NUMBERED: list[tuple[int, ...]] = [()]  # (0, 1, 2, ...): as long as the most partitions a topic had


def _in_order(run: TopicRun) -> bool:
    """Whether a topic's partition numbers increase: most are 0 .. n-1, one tuple comparison in C (a
    comparison per partition, 30,000 on every command's critical path, took ~1 ms); else checked pairwise."""
    indexes, numbered = run.indexes, _NUMBERED[0]
    if len(numbered) < len(indexes):
        numbered = _NUMBERED[0] = tuple(range(len(indexes)))
    return indexes == numbered[: len(indexes)] or all(map(lt, indexes, islice(indexes, 1, None)))


# The answers read here (a Fetch's by .fetch_answers, DescribeProducers' by .producers_answers, a batched OffsetFetch's and
# ListGroups' by .group_answers), by the request type; those modules imported when their first answer is read
# (~2 ms before every command's first connect, imported with the wire).
READERS = ByRequestType({
    p.DescribeProducers: lambda: wire_module("producers_answers").read_describe_producers,
    p.OffsetFetch: lambda: wire_module("group_answers").read_offset_fetch,
    p.ListGroups: lambda: wire_module("group_answers").read_list_groups,
    p.Fetch: lambda: wire_module("fetch_answers").read_fetch,
})
READERS.update({p.ListOffsets: read_list_offsets, p.Metadata: read_metadata})

# type -> (the kafka-python request without its partitions, the body at a version). A Fetch's (written per
# send: wire.client.WRITTEN_PER_SEND, not kept) imports .fetch_body when the first is written, not before
# the bootstrap: it and its .fetch and .fetch_records are none of a command's first requests.
WRITERS = ByRequestType({p.Fetch: lambda: (wire_module("fetch_body").fetch_shell, wire_module("fetch_body").fetch_body)})
WRITERS.update({
    p.ListOffsets: (list_offsets_shell, list_offsets_body),
    p.DescribeProducers: (describe_producers_shell, describe_producers_body),
    p.Metadata: (metadata_shell, metadata_body),  # written per send too: a few bytes
})


# -- OffsetFetch's request (batched, v8-v9, not stable: every committed offset of a coordinator's groups) --
# kafka-python builds an object per group and encodes it field by field: 15 ms per 1,700 groups, 0.5 here.

def offset_fetch_shell(request: p.OffsetFetch) -> Any:
    """``request`` as kafka-python's batched OffsetFetchRequest without its groups (a stable one names
    partitions: kafka-python's, never kept by the wire); the body is :func:`offset_fetch_body`'s."""
    from kafka.protocol.consumer import OffsetFetchRequest

    from kafkatxn.kafka.wire.groups_codec import OFFSET_FETCH_BATCHED

    return OffsetFetchRequest(groups=[], require_stable=False, min_version=min(OFFSET_FETCH_BATCHED), max_version=max(OFFSET_FETCH_BATCHED))


def offset_fetch_body(request: p.OffsetFetch, version: int) -> bytes:
    """Per group its compact id, (v9+) MemberId null and MemberEpoch -1, a null topic list and no tagged
    fields; then RequireStable false and no tagged fields."""
    if request.stable or not request.batched or version < 8:
        raise ValueError(f"an OffsetFetch body is written here only batched, not stable, at v8+ (v{version})")
    tail = (b"\x00" + _INT32(-1) if version >= 9 else b"") + b"\x00" + NO_TAGGED_FIELDS
    out = [array_length(len(request.group_ids), True)]
    for group in request.group_ids:
        out += (string(group, True), tail)
    out.append(b"\x00" + NO_TAGGED_FIELDS)
    return b"".join(out)


WRITERS[p.OffsetFetch] = (offset_fetch_shell, offset_fetch_body)
