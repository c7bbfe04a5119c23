"""ListOffsets answers read with a Python step per topic at most, none per partition, and none at all
for an answer laid out as one read before.

A flexible ListOffsets answer's partition is a record of 27 bytes: its index, error code, timestamp,
offset, leader epoch, and a byte that counts its tagged fields. :func:`read` walks an answer's topic
heads alone (a name, a partition count, the byte after the topic's records), gathers the records and
takes each column out of them at once in C (:func:`_column`), the TopicPartitions made in C too. What
the walk found is kept as the answer's :class:`Layout`: where its heads and records lie, the heads'
bytes, its partitions. A broker lays out its answers to the same question alike (its topics and
partitions in the order of its own hash maps, not the order asked), so the other isolation level's
answer of the same leader, and each exporter scrape's again, are read by the layout with no Python step
per topic: the heads compared as bytes and the partition numbers as a column, in C.

Reading each topic's partitions apart (as the wire did) cost a Python step or more per topic of
every answer, which a cluster of many small topics pays many times over: at 3,000 topics of 10
partitions, ``lso`` spent 0.26 s of CPU beyond its start-up, against 0.15 s at 300 topics of 100.
An answer with tagged fields, or bytes that are no such answer, is not read here (None): kafka-python
decodes it, as before.
"""

from __future__ import annotations

import struct
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable
from itertools import chain, repeat
from operator import itemgetter, sub

from kafkatxn.kafka.varint import decode_uvarint
from kafkatxn.model import TopicPartition, kept_topic_partitions

RECORD_SIZE = 27
_INDEX_AT, _ERROR_AT, _OFFSET_AT, _TAGS_AT = 0, 4, 14, 26  # where a record's fields start
_THROTTLE = struct.Struct(">i")
_LITTLE_ENDIAN = sys.byteorder == "little"

# The layouts read last, by their answers' length, the least recently used let go first once they hold
# more partitions than this (an exporter's pass at 100,000 partitions reads 200,000: both isolation levels).
LAYOUT_PARTITIONS_KEPT = 400_000
_layouts: OrderedDict[int, tuple[Layout, ...]] = OrderedDict()
_held = [0]
_keeping = threading.Lock()  # the IO thread reads answers; a test or another wire may too
# An answer of this many partitions a topic or more (on average) names the kept TopicPartitions; fewer, new ones
# (10,000 partitions of an answer: 0.6 ms looked up at 33 a topic, 1.3 ms made; 3.1 and 1.7 ms at 2).
KEPT_FROM = 16


class Layout:
    """Where an answer's topic heads and partition records lie (``heads_at``, ``records_at``: getters of
    their slices), what its heads are (``heads``: bytes), and its partitions in its order
    (``partitions``: TopicPartitions; ``indexes``: their numbers)."""

    __slots__ = ("heads", "heads_at", "indexes", "length", "partitions", "records_at")

    def __init__(self, length: int, heads: tuple[bytes, ...], heads_at: Callable[[memoryview], tuple], records_at: Callable[[memoryview], tuple],
                 indexes: list[int], partitions: tuple[TopicPartition, ...]) -> None:
        self.length, self.heads, self.heads_at, self.records_at = length, heads, heads_at, records_at
        self.indexes, self.partitions = indexes, partitions

    def read(self, data: memoryview) -> tuple[tuple[TopicPartition, ...], list[int], list[int], int] | None:
        """``data`` (an answer's body) read as laid out here: its partitions, their error codes and
        offsets, its throttle time; None where it is laid out otherwise."""
        if len(data) != self.length or self.heads_at(data) != self.heads:
            return None
        records = b"".join(self.records_at(data))
        count = len(self.indexes)
        if records[_TAGS_AT::RECORD_SIZE].count(0) != count or _column(records, _INDEX_AT, "i", count) != self.indexes:
            return None
        return self.columns(records, data)

    def columns(self, records: bytes, data: memoryview) -> tuple[tuple[TopicPartition, ...], list[int], list[int], int]:
        """What :meth:`read` returns, from ``records`` (``data``'s, gathered and checked as laid out here)."""
        count = len(self.indexes)
        return self.partitions, _column(records, _ERROR_AT, "h", count), _column(records, _OFFSET_AT, "q", count), \
            _THROTTLE.unpack_from(data, 0)[0]


def read(data: memoryview) -> tuple[tuple[TopicPartition, ...], list[int], list[int], int] | None:
    """A flexible ListOffsets answer's body (after the response header): its partitions, their error
    codes and offsets in its order, and its throttle time; None where it has tagged fields or is no
    such answer. Read by a layout kept (:class:`Layout`) where one fits, else walked (:func:`_walked`)
    and its layout kept."""
    for layout in _layouts.get(len(data), ()):
        done = layout.read(data)
        if done is not None:
            return done
    try:
        walked = _walked(data)
    except (IndexError, ValueError):  # short, or a name that is no UTF-8: no such answer
        return None
    if walked is None:
        return None
    layout, records = walked
    _keep(layout)
    return layout.columns(records, data)  # checked by the walk: not read again by the layout


def _walked(data: memoryview) -> tuple[Layout, bytes] | None:
    """The layout of ``data`` found by walking its topics' heads, and its records gathered: a few Python
    steps per topic, the rest in C; None where a topic or the answer has tagged fields, or the bytes do
    not end where the last topic does."""
    raw = bytes(data)  # indexed faster than a view (a copy of ~30 bytes a partition)
    topics, pos = decode_uvarint(raw, 4)
    names_at: list[int] = []
    names_end: list[int] = []
    starts: list[int] = []  # each topic's records
    ends: list[int] = []
    for _ in range(topics - 1):
        size = raw[pos]  # the name's length + 1: one byte under 128 (a varint's first byte otherwise)
        size, pos = (size, pos + 1) if size < 0x80 else decode_uvarint(raw, pos)
        if not size:  # a null name: no such answer
            return None
        names_at.append(pos)
        pos += size - 1
        names_end.append(pos)
        size = raw[pos]  # the partitions + 1, as the name's length
        size, pos = (size, pos + 1) if size < 0x80 else decode_uvarint(raw, pos)
        if not size:  # a null array of partitions: no such answer
            return None
        starts.append(pos)
        pos += RECORD_SIZE * (size - 1)
        ends.append(pos)
        if raw[pos] != 0:  # the topic's tagged fields: none here
            return None
        pos += 1
    if pos != len(raw) - 1 or raw[pos] != 0:  # the answer's tagged fields: none, and nothing after
        return None
    # Before each topic's records, from the end of the records before (the throttle time, the answer's
    # to vary, left out); after the last, the tagged-field counts of the last topic and of the answer.
    heads_at = _getter(list(map(slice, [4, *ends], [*starts, len(raw)])))
    records_at = _getter(list(map(slice, starts, ends)))
    gathered = b"".join(records_at(raw))
    count = len(gathered) // RECORD_SIZE
    if gathered[_TAGS_AT::RECORD_SIZE].count(0) != count:
        return None  # a partition with tagged fields
    indexes = _column(gathered, _INDEX_AT, "i", count)
    names = list(map(str, map(raw.__getitem__, map(slice, names_at, names_end)), repeat("utf-8")))
    counts = list(map(RECORD_SIZE.__rfloordiv__, map(sub, ends, starts)))
    partitions = _partitions(names, counts, indexes)
    return Layout(len(raw), tuple(map(bytes, heads_at(raw))), heads_at, records_at, indexes, partitions), gathered


def _partitions(names: list[str], counts: list[int], indexes: list[int]) -> tuple[TopicPartition, ...]:
    """The TopicPartitions of an answer's topics (``names``, ``counts`` partitions each, at ``indexes``).
    Topics of :data:`KEPT_FROM` partitions or more on average are the kept ones
    (:func:`~kafkatxn.model.kept_topic_partitions`): a Python step per topic, none made once the metadata's
    routing or another answer has made them, and the metadata's own made here if not yet (the same
    30,000 at 30,000 partitions, made once, not twice). Smaller ones are made in C: 0.13 us a
    TopicPartition, where a look-up costs more per topic than its few partitions."""
    if len(indexes) < KEPT_FROM * len(names):
        return tuple(map(tuple.__new__, repeat(TopicPartition), zip(chain.from_iterable(map(repeat, names, counts)), indexes)))
    out: list[TopicPartition] = []
    at = 0
    for name, count in zip(names, counts):
        out += kept_topic_partitions(name, indexes[at : at + count])
        at += count
    return tuple(out)


def _getter(places: list[slice]) -> Callable[[memoryview], tuple]:
    """What takes ``places`` out of an answer as a tuple, in C (``itemgetter``, which returns one place bare)."""
    if len(places) > 1:
        return itemgetter(*places)
    return lambda data, places=tuple(places): tuple(data[place] for place in places)


def _column(records: bytes, at: int, code: str, count: int) -> list[int]:
    """The big-endian signed field of type ``code`` (``struct``'s ``h``, ``i`` or ``q``) at ``at`` of each
    record, as ints: its bytes gathered from every record by strided slices, in the machine's byte
    order, and read as an array of that type (C throughout)."""
    width = struct.calcsize(code)
    gathered = bytearray(width * count)
    for k in range(width):  # the field's byte k (big-endian), of every record at once
        gathered[(width - 1 - k if _LITTLE_ENDIAN else k) :: width] = records[at + k :: RECORD_SIZE]
    return memoryview(gathered).cast(code).tolist()


def _keep(layout: Layout) -> None:
    """``layout`` kept for the answers laid out alike, the least recently kept let go past
    :data:`LAYOUT_PARTITIONS_KEPT` partitions."""
    size = len(layout.indexes)
    if size > LAYOUT_PARTITIONS_KEPT:
        return
    with _keeping:
        _layouts[layout.length] = (layout, *_layouts.pop(layout.length, ()))[:2]  # two alike in length at most
        _held[0] = sum(len(kept.indexes) for same in _layouts.values() for kept in same)
        while _held[0] > LAYOUT_PARTITIONS_KEPT and _layouts:
            _, gone = _layouts.popitem(last=False)
            _held[0] -= sum(len(kept.indexes) for kept in gone)
