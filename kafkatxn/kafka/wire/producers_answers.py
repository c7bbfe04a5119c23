"""A DescribeProducers answer (version 0, flexible) read from its bytes: what the wire's decoder makes of
kafka-python's objects (:mod:`.producers_codec`), without them. One answer per leader holds up to 10,000
partitions, every partition of a cluster each pass of ``lso``, ``hanging``, ``check`` and every scrape.

A partition with no error message and no tagged fields is a fixed-size record for its count of
producers: 9 bytes with none (most partitions of a cluster whose producers expired), 46 with one (a
partition an idempotent producer wrote to lately), 37 more per producer. A topic's partitions are
read as runs of records alike, each run found by one regular expression match (in C) and unpacked
by one ``struct`` call, its columns taken apart by slices: no Python-level step per partition, nor
per producer, where most partitions have none or one and a few more. A topic none of whose partitions has
a producer, an error or tagged fields (most topics of most clusters) is one match and one unpack of its
partition numbers (3.6 ms an answer of 300 topics x 33 partitions, 15 with producers: 7.1 ms by runs). A partition with an error
message or tagged fields is read one at a time (:func:`_one_by_one`, the topic's from there), and an
answer with tagged fields elsewhere is left to kafka-python (None).

The answer's partitions are three columns (:class:`ProducerColumns`: TopicPartitions, error names, each
partition's producers), which the facade takes as they are: no :class:`~kafkatxn.kafka.protocol.PartitionProducers`
made per partition (30,000 a pass, then taken apart again; 5 of the 12 ms an answer of 10,000 took).

A topic's partitions read again from the same bytes are the same partitions again
(:class:`~.answer_memo.BlockMemo`): a quiet cluster's producers are what they were at the last scrape.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence
from itertools import repeat
from typing import Any, Iterator

from kafkatxn.kafka import protocol as p
from kafkatxn.kafka.varint import decode_compact_string as _compact_string, decode_uvarint as _read_uvarint
from kafkatxn.kafka.wire.answer_memo import BlockMemo
from kafkatxn.kafka.wire.names import error_name, error_names, made, topic_partitions
from kafkatxn.model import ProducerState, TopicPartition

_THROTTLE = struct.Struct(">i")
# A producer: ProducerId, ProducerEpoch, LastSequence, LastTimestamp, CoordinatorEpoch,
# CurrentTxnStartOffset, then the count of its tagged fields (unpacked, to be checked: 0).
_PRODUCER_STATE = struct.Struct(">qiiqiqB")
_PRODUCER_SIZE = _PRODUCER_STATE.size
_PARTITION_HEAD = struct.Struct(">ih")  # PartitionIndex, ErrorCode
# A partition's bytes besides its producers': index, error, a null message, the producers' count, tagged fields.
_RECORD_FIXED = _PARTITION_HEAD.size + 3
_MOST_PRODUCERS = 0x7E  # a count + 1 that is one byte

# Per count of producers: a run of partitions with that many, no error message and no tagged fields.
_RUN_PATTERNS: dict[int, re.Pattern[bytes]] = {}
# (producers, partitions) -> the struct of such a run, kept for at most _FORMATS_KEPT_PARTITIONS in all;
# a run longer than _RUN_LONGEST is unpacked a partition at a time.
_FORMATS: dict[tuple[int, int], struct.Struct] = {}
_FORMATS_PARTITIONS = [0]
_FORMATS_KEPT_PARTITIONS = 20_000
_RUN_LONGEST = 1_000

# A topic's partitions at a leader, by its name and their bytes. ~350 bytes a partition with one
# producer; a generation holds 100,000 partitions (a pass at the largest size).
MEMO = BlockMemo(200_000)


def _record_format(producers: int) -> str:
    return "ih2x" + "qiiqiqx" * producers + "x"


def _run_pattern(producers: int) -> re.Pattern[bytes]:
    pattern = _RUN_PATTERNS.get(producers)
    if pattern is None:
        producer = b".{%d}\\x00" % (_PRODUCER_SIZE - 1)
        record = b".{6}\\x00" + re.escape(bytes([producers + 1])) + producer * producers + b"\\x00"
        pattern = _RUN_PATTERNS[producers] = re.compile(b"(?s)(?:" + record + b")*")
    return pattern


def _run_columns(data: memoryview, pos: int, producers: int, partitions: int) -> list[tuple]:
    """The columns (index, error, then each producer's six fields) of a run of ``partitions`` alike."""
    width = 2 + 6 * producers
    if partitions > _RUN_LONGEST:
        size = _RECORD_FIXED + _PRODUCER_SIZE * producers
        return list(zip(*struct.iter_unpack(">" + _record_format(producers), data[pos : pos + partitions * size])))
    layout = _FORMATS.get((producers, partitions))
    if layout is None:
        if _FORMATS_PARTITIONS[0] + partitions > _FORMATS_KEPT_PARTITIONS:
            _FORMATS.clear()
            _FORMATS_PARTITIONS[0] = 0
        layout = _FORMATS[(producers, partitions)] = struct.Struct(">" + _record_format(producers) * partitions)
        _FORMATS_PARTITIONS[0] += partitions
    fields = layout.unpack_from(data, pos)
    return [fields[i::width] for i in range(width)]


def _runs(data: memoryview, pos: int, count: int) -> tuple[list[tuple[int, int, int]], int, int]:
    """The runs of alike partitions (producers, where, how many) from ``pos``, up to ``count``
    partitions, where they end, and the partitions left: some where a partition is not a plain record."""
    runs = []
    while count:
        producers = data[pos + 7] - 1 if data[pos + 6] == 0 else -1  # a null error message
        if not 0 <= producers <= _MOST_PRODUCERS:
            break
        size = _RECORD_FIXED + _PRODUCER_SIZE * producers
        match = _run_pattern(producers).match(data, pos, pos + count * size)
        partitions = (match.end() - pos) // size if match is not None else 0
        if not partitions:
            break
        runs.append((producers, pos, partitions))
        pos += partitions * size
        count -= partitions
    return runs, pos, count


class ProducerColumns(Sequence[p.PartitionProducers]):
    """A DescribeProducers answer's partitions as the wire reads them: :attr:`columns` (their
    TopicPartitions, error names, and each one's tuple of producers), which the facade takes as they
    are. Read as rows (iterated, indexed, compared with a tuple of :class:`~kafkatxn.kafka.protocol.PartitionProducers`)
    it is the tuple of them."""

    __slots__ = ("columns",)

    def __init__(self, tps: list[TopicPartition], errors: list[str | None], producers: list[tuple[ProducerState, ...]]):
        self.columns = (tps, errors, producers)

    def __len__(self) -> int:
        return len(self.columns[0])

    def __iter__(self) -> Iterator[p.PartitionProducers]:
        return made(p.PartitionProducers, zip(*self.columns))

    def __getitem__(self, index: Any) -> Any:
        return tuple(self)[index]

    def __eq__(self, other: object) -> bool:  # (unhashable, as a list: __eq__ without __hash__)
        # Two answers' columns are equal where their rows are; rows are made only to compare with rows.
        return self.columns == other.columns if isinstance(other, ProducerColumns) else \
            tuple(self) == other if isinstance(other, tuple) else NotImplemented


def _read_runs(data: memoryview, runs: list[tuple[int, int, int]], name: str) -> tuple[list, list, list]:
    """The runs' columns: TopicPartitions, error names, each partition's producers."""
    tps: list[TopicPartition] = []
    errors: list[str | None] = []
    states: list[tuple[ProducerState, ...]] = []
    for producers, pos, partitions in runs:
        columns = _run_columns(data, pos, producers, partitions)
        tps.extend(topic_partitions(name, columns[0]))
        errors.extend(error_names(columns[1]) if any(columns[1]) else repeat(None, partitions))
        if producers:
            # The j-th producer of every partition at once (a named tuple each, made in C), zipped into each partition's tuple.
            states.extend(zip(*[made(ProducerState, zip(*columns[2 + 6 * j : 8 + 6 * j])) for j in range(producers)]))
        else:
            states.extend(repeat((), partitions))
    return tps, errors, states


def _one_by_one(data: memoryview, pos: int, count: int, name: str, out: tuple[list, list, list]) -> int | None:
    """A topic's partitions read one at a time (an error message among them), added to the columns
    ``out``; None where one has tagged fields."""
    size = _PRODUCER_SIZE
    head = _PARTITION_HEAD.unpack_from
    tps, errors, states = out
    for _ in range(count):
        index, error = head(data, pos)
        message, pos = _read_uvarint(data, pos + _PARTITION_HEAD.size)
        pos += max(message - 1, 0)  # the error message (null: 0), not kept (nor by the decoder)
        n, pos = _read_uvarint(data, pos)
        if n == 0:
            return None  # a null list: not what the schema allows
        rows = list(_PRODUCER_STATE.iter_unpack(data[pos : pos + (n - 1) * size]))
        pos += (n - 1) * size
        if any(row[6] for row in rows) or data[pos] != 0:
            return None
        pos += 1
        tps.append(TopicPartition(name, index))
        errors.append(error_name(error) if error else None)
        states.append(tuple(made(ProducerState, (row[:6] for row in rows))))
    return pos


# A run of partitions with no producer, no error and no tagged fields (most of a cluster's): their numbers, the only column
# to read. Per count of partitions, its layout (at most _FORMATS_KEPT_PARTITIONS kept in all, with _FORMATS').
_NO_PRODUCERS = re.compile(b"(?s)(?:.{4}\\x00\\x00\\x00\\x01\\x00)*")
_NO_PRODUCERS_SIZE = _RECORD_FIXED
_NUMBERS_LAYOUTS: dict[int, struct.Struct] = {}


def _numbers(data: memoryview, pos: int, count: int) -> Sequence[int]:
    """The partition numbers of ``count`` records of partitions with no producer from ``pos``."""
    if count > _RUN_LONGEST:
        return [row[0] for row in struct.iter_unpack(">i5x", data[pos : pos + count * _NO_PRODUCERS_SIZE])]
    layout = _NUMBERS_LAYOUTS.get(count)
    if layout is None:
        if _FORMATS_PARTITIONS[0] + count > _FORMATS_KEPT_PARTITIONS:
            _FORMATS.clear()
            _NUMBERS_LAYOUTS.clear()
            _FORMATS_PARTITIONS[0] = 0
        layout = _NUMBERS_LAYOUTS[count] = struct.Struct(">" + "i5x" * count)
        _FORMATS_PARTITIONS[0] += count
    return layout.unpack_from(data, pos)


def _topic(data: memoryview, pos: int, count: int, name: str, out: tuple[list, list, list]) -> int | None:
    """A topic's ``count`` partitions from ``pos`` added to the columns ``out``; where they end (None: tagged fields)."""
    end = pos + count * _NO_PRODUCERS_SIZE
    if _NO_PRODUCERS.match(data, pos, end).end() == end:  # no producer on any: one match and one unpack, nothing kept
        tps, errors, states = out
        tps.extend(topic_partitions(name, _numbers(data, pos, count)))
        errors.extend(repeat(None, count))
        states.extend(repeat((), count))
        return end
    runs, end, left = _runs(data, pos, count)
    if left:  # a partition with an error message or tagged fields: the rest one at a time
        for column, read in zip(out, _read_runs(data, runs, name)):
            column.extend(read)
        return _one_by_one(data, end, left, name, out)
    key = (name, bytes(data[pos:end]))
    kept = MEMO.get(key)
    if kept is None:
        kept = tuple(map(tuple, _read_runs(data, runs, name)))
        MEMO.put(key, kept, count)
    for column, read in zip(out, kept):
        column.extend(read)
    return end


def read_describe_producers(data: memoryview, version: int) -> tuple[p.DescribeProducersResponse, int] | None:
    """A DescribeProducers answer's body: what the wire's decoder makes of kafka-python's, and its
    throttle time; None where tagged fields are found (kafka-python's)."""
    (throttle_ms,) = _THROTTLE.unpack_from(data, 0)
    topics, pos = _read_uvarint(data, 4)
    out: tuple[list, list, list] = ([], [], [])  # TopicPartitions, error names, producers
    for _ in range(topics - 1):
        name, pos = _compact_string(data, pos)
        count, pos = _read_uvarint(data, pos)
        if name is None:
            return None
        if count > 1:
            pos = _topic(data, pos, count - 1, name, out)
            if pos is None:
                return None
        if data[pos] != 0:
            return None
        pos += 1
    if pos != len(data) - 1 or data[pos] != 0:
        return None
    return p.DescribeProducersResponse(ProducerColumns(*out)), throttle_ms
