"""The consumer groups' answers every group command and exporter scrape reads, read from their bytes
(the wire's readers, :data:`kafkatxn.kafka.wire.bodies.READERS`): a batched OffsetFetch and ListGroups.

A batched OffsetFetch answer (v8-v9, flexible) read from its bytes: what the wire's decoder makes
of kafka-python's objects (per group its error, its committed offsets and the partitions answered
UNSTABLE_OFFSET_COMMIT), without them. 100,000 committed offsets at 5,000 groups x 20 partitions
arrive before ``lso --groups``, ``diagnose``, ``check --groups`` and every exporter scrape with group
lag, read on the IO thread while the command waits.

A topic's partitions whose metadata are all as long as its first's are fixed-size records: they are
taken apart by one ``struct`` unpack of the whole run (a format per run length and metadata length,
kept, 20,000 partitions' worth at most), its indexes, offsets and errors then every third field (slices, in C): no tuple per partition,
no transposing. A topic whose partitions differ is read one partition at a time; an answer with
tagged fields, or a group answered UNSTABLE_OFFSET_COMMIT as a whole (the decoder names the
partitions the request asked there), is left to kafka-python (None).

A ListGroups answer (v3+, flexible) lists every group a broker coordinates, four strings each (5,000
groups a scrape): kafka-python's decoder made an object per group, the codec a ListedGroup of it.

Both are asked every scrape, and a quiet cluster answers with the same bytes: a group's committed
offsets whose bytes were read before as a whole group are that group again (:data:`MEMO`), and a
coordinator's listing read before is that listing again (:data:`LISTINGS`), each a
:class:`~.answer_memo.BlockMemo`.
"""

from __future__ import annotations

import struct
from types import MappingProxyType

from kafkatxn.kafka import protocol as p
from kafkatxn.kafka.varint import decode_compact_string as _compact_string, decode_uvarint as _read_uvarint
from kafkatxn.kafka.wire.answer_memo import BlockMemo
from kafkatxn.kafka.wire.names import error_name, made, topic_partitions
from kafkatxn.model import TopicPartition

OFFSET_FETCH_READ_FROM = 8  # the batched form; one group per request (v2-v7) is kafka-python's
_UNSTABLE_OFFSET_COMMIT = 88
_THROTTLE = struct.Struct(">i")
_OFFSET_FETCH_PARTITION = struct.Struct(">iqi")  # PartitionIndex, CommittedOffset, CommittedLeaderEpoch
_ERROR = struct.Struct(">h")
_NONE_UNSTABLE: frozenset[TopicPartition] = frozenset()
# A group's committed offsets by its name, with the bytes they were read from (a group is read alike at every version
# read): a group that committed nothing since the last scrape is the same group again (.answer_memo), one that did
# replaces its entry. ~2.9 kB a group of 20 offsets. A generation holds
# a pass at the largest size (20,000 groups x 20 offsets, 420,000 counted): a pass asks its groups in the
# same order each time, so a generation smaller than a pass finds none of them again, not some (each generation
# rotated out just before its groups come round): at 400,000 (10,000 groups) the scrape read all 400,000 offsets
# anew at 20,000 groups, 310 ms of the IO thread against 28 ms found (tests/unit/test_offset_fetch_memo_scale.py).
# Past two generations (~47,600 groups of 20) the scrapes' passes keep the groups that fit (.answer_memo.begin_passes).
MEMO = BlockMemo(1_000_000)
# (partitions, metadata length) -> the struct of a run of that many partitions with metadata that long.
# A struct holds ~100 bytes per partition: the runs kept hold 20,000 partitions at most (~2 MB), and a
# run longer than _RUN_LONGEST (a group committed on most of a large topic) is unpacked a partition at a time.
_RUNS: dict[tuple[int, int], struct.Struct] = {}
_RUNS_PARTITIONS = [0]  # the partitions of the runs kept
_RUNS_KEPT_PARTITIONS = 20_000
_RUN_LONGEST = 1_000
# A partition's bytes but its metadata's: index, offset, leader epoch, the metadata's length (one byte),
# error, and the count of its tagged fields.
_PARTITION_FIXED = 4 + 8 + 4 + 1 + 2 + 1


def _columns(block: bytes, partitions: int, metadata: int) -> tuple[tuple, tuple, tuple]:
    """The indexes, offsets and errors of ``partitions`` partitions in ``block``, their metadata
    ``metadata`` bytes long (its length a one-byte varint) and no tagged fields each
    (:data:`_PARTITION_FIXED` bytes and the metadata): one unpack of the run, every third field."""
    if partitions > _RUN_LONGEST:
        indexes, offsets, errors = zip(*struct.iter_unpack(f">iq5x{metadata}xhx", block))
        return indexes, offsets, errors
    layout = _RUNS.get((partitions, metadata))
    if layout is None:
        if _RUNS_PARTITIONS[0] + partitions > _RUNS_KEPT_PARTITIONS:
            _RUNS.clear()
            _RUNS_PARTITIONS[0] = 0
        layout = _RUNS[(partitions, metadata)] = struct.Struct(">" + f"iq5x{metadata}xhx" * partitions)
        _RUNS_PARTITIONS[0] += partitions
    fields = layout.unpack(block)
    return fields[0::3], fields[1::3], fields[2::3]


def _one_by_one(data: memoryview, pos: int, count: int) -> tuple[tuple, tuple, tuple, int] | None:
    """A topic's partitions read one at a time (their metadata differ in length): their indexes,
    offsets and errors, and where they end; None where one has tagged fields."""
    rows = []
    for _ in range(count):
        index, offset, _epoch = _OFFSET_FETCH_PARTITION.unpack_from(data, pos)
        length, pos = _read_uvarint(data, pos + _OFFSET_FETCH_PARTITION.size)
        pos += max(length - 1, 0)  # the metadata (null: 0), not kept (nor by the decoder)
        (error,) = _ERROR.unpack_from(data, pos)
        if data[pos + 2] != 0:
            return None
        pos += 3
        rows.append((index, offset, error))
    indexes, offsets, errors = zip(*rows)
    return indexes, offsets, errors, pos


def _group_end(raw: bytes, pos: int) -> int:
    """Where the group at ``pos`` ends were every length in it one byte and each topic's partitions
    alike (most groups): the bytes it is looked up by in :data:`MEMO`. Not checked (0 where it cannot
    be), as only bytes read before as a whole group are found there."""
    try:
        pos += raw[pos]  # the group id: its length + 1, then its bytes
        topics = raw[pos]
        pos += 1
        for _ in range(topics - 1):
            pos += raw[pos]  # the topic's name
            partitions, first = raw[pos] - 1, raw[pos + 17]  # the first partition's metadata length + 1
            pos += 2 + partitions * (_PARTITION_FIXED + max(first - 1, 0))  # the count, the partitions, the tagged fields
        return pos + 3  # ErrorCode, tagged fields
    except IndexError:
        return 0


def _group(raw: bytes, data: memoryview, pos: int) -> tuple[p.GroupOffsets, int] | None:
    """The group at ``pos`` and where it ends; None where it is not read here (tagged fields, the
    group answered UNSTABLE_OFFSET_COMMIT as a whole). Reads no byte past its end."""
    length = raw[pos]
    if 0 < length < 0x80:
        group, pos = raw[pos + 1 : pos + length].decode(), pos + length
    else:
        group, pos = _compact_string(data, pos)
    topics = raw[pos]
    pos += 1
    if topics >= 0x80:
        topics, pos = _read_uvarint(raw, pos - 1)
    if group is None or topics == 0:
        return None
    committed: dict[TopicPartition, int] = {}
    unstable: list[TopicPartition] = []
    for _topic in range(topics - 1):
        length = raw[pos]
        if 0 < length < 0x80:
            name, pos = raw[pos + 1 : pos + length].decode(), pos + length
        else:
            name, pos = _compact_string(data, pos)
        partitions = raw[pos] - 1
        pos += 1
        if partitions >= 0x7F:
            partitions, pos = _read_uvarint(raw, pos - 1)
            partitions -= 1
        if name is None or partitions < 0:
            return None
        if partitions > 0:
            first = raw[pos + 16]  # the first partition's metadata length + 1 (0: null)
            size = _PARTITION_FIXED + max(first - 1, 0) if first < 0x80 else 0
            end = pos + partitions * size
            block = raw[pos:end]
            if (size and len(block) == partitions * size and block[16::size].count(first) == partitions
                    and block[size - 1 :: size].count(0) == partitions):
                indexes, offsets, errors = _columns(block, partitions, size - _PARTITION_FIXED)
                pos = end
            else:
                one_by_one = _one_by_one(data, pos, partitions)
                if one_by_one is None:
                    return None
                indexes, offsets, errors, pos = one_by_one
            tps = topic_partitions(name, indexes)
            if not any(errors) and min(offsets) >= 0:  # most answers: every partition committed
                committed.update(zip(tps, offsets))
            else:
                tps = list(tps)
                committed.update((tp, off) for tp, off, error in zip(tps, offsets, errors) if off >= 0 and not error)
                unstable.extend(tp for tp, error in zip(tps, errors) if error == _UNSTABLE_OFFSET_COMMIT)
        if raw[pos] != 0:
            return None
        pos += 1
    (error_code,) = _ERROR.unpack_from(raw, pos)
    if error_code == _UNSTABLE_OFFSET_COMMIT or raw[pos + 2] != 0:
        return None
    # Read-only: the group is kept in MEMO and handed to every later answer with the same bytes.
    return p.GroupOffsets(group, error_name(error_code) if error_code else None, MappingProxyType(committed),
                          frozenset(unstable) if unstable else _NONE_UNSTABLE), pos + 3


def read_offset_fetch(data: memoryview, version: int) -> tuple[p.OffsetFetchResponse, int] | None:
    """A batched OffsetFetch answer's body and its throttle time; None where it is not read here
    (before v8, tagged fields, a group answered UNSTABLE_OFFSET_COMMIT as a whole). A length under
    128 (a one-byte varint: every count and name but the longest) is read in place; a group whose
    bytes are those of a group read before is that group again (:data:`MEMO`)."""
    if version < OFFSET_FETCH_READ_FROM:
        return None
    raw = bytes(data)  # one copy: a byte of bytes is read and sliced in fewer steps than a memoryview's
    (throttle_ms,) = _THROTTLE.unpack_from(raw, 0)
    count, pos = _read_uvarint(raw, 4)
    groups: list[p.GroupOffsets] = []
    looking = bool(MEMO)  # nothing to find in a command's first answer: no group's end looked for
    for _ in range(count - 1):
        start = pos
        if looking:
            end = _group_end(raw, pos)
            kept = MEMO.get(raw[pos : pos + raw[pos]]) if end > pos else None
            if kept is not None and kept[0] == raw[pos:end]:
                groups.append(kept[1])
                pos = end
                continue
        read = _group(raw, data, pos)
        if read is None:
            return None
        group, pos = read
        # Kept by the group's name (its bytes, with their length), with the bytes it was read from (alike at v8 and
        # v9): a group that committed since replaces its entry, so a busy cluster's groups are held once, not once per commit.
        MEMO.put(raw[start : start + raw[start]], (raw[start:pos], group), len(group.offsets) + 1)
        groups.append(group)
    if pos != len(raw) - 1 or raw[pos] != 0:
        return None
    return p.OffsetFetchResponse(tuple(groups)), throttle_ms


# -- ListGroups (flexible, v3+) ----------------------------------------------------------------------

LIST_GROUPS_READ_FROM = 3
_LIST_GROUPS_STATE, _LIST_GROUPS_TYPE = 4, 5  # GroupState (KIP-518), GroupType (KIP-848)
_HEAD = struct.Struct(">ih")  # ThrottleTimeMs, ErrorCode
# A coordinator's listing read again from the same bytes (no group came, went or changed state since):
# the groups read before (.answer_memo), 100,000 groups' at most.
LISTINGS = BlockMemo(100_000)


def read_list_groups(data: memoryview, version: int) -> tuple[p.ListGroupsResponse, int] | None:
    """A ListGroups answer's body (what the wire's decoder makes of kafka-python's: a null or absent
    string is ""; a state before v4 and a type before v5 are "") and its throttle time; None before
    v3 or where a group or the answer has tagged fields."""
    if version < LIST_GROUPS_READ_FROM:
        return None
    raw = bytes(data)
    key = (version, raw)
    kept = LISTINGS.get(key)
    if kept is None:
        kept = _list_groups(raw, data, version)
        if kept is not None:
            LISTINGS.put(key, kept, len(kept[0].groups) + 1)
    return kept


def _list_groups(raw: bytes, data: memoryview, version: int) -> tuple[p.ListGroupsResponse, int] | None:
    """:func:`read_list_groups` of bytes not read before."""
    throttle_ms, error_code = _HEAD.unpack_from(raw, 0)
    count, pos = _read_uvarint(raw, 6)
    strings = 2 + (version >= _LIST_GROUPS_STATE) + (version >= _LIST_GROUPS_TYPE)
    groups = []
    for _ in range(count - 1):
        fields = []
        for _field in range(strings):
            length = raw[pos]
            if 0 < length < 0x80:
                fields.append(raw[pos + 1 : pos + length].decode())
                pos += length
            else:
                value, pos = _compact_string(data, pos)
                fields.append(value or "")
        if raw[pos] != 0:
            return None
        pos += 1
        groups.append(fields)
    if pos != len(raw) - 1 or raw[pos] != 0:
        return None
    if strings < 4:
        groups = [[*fields, *("",) * (4 - strings)] for fields in groups]
    return p.ListGroupsResponse(error_name(error_code) if error_code else None, tuple(made(p.ListedGroup, groups))), throttle_ms
