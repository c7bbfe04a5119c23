"""The committed offsets' memo (``group_answers.MEMO``) at the issue's largest size: 20,000 groups x 20
partitions (bench_sizes' 100,000 partitions). An exporter scrape reads every group's OffsetFetch answer
in the same order each time; a memo whose generation holds less than one pass finds none of them
again (each generation rotated out just before its groups are asked again), so the scrape's per-group
cost stepped up past ~9,500 groups (issue 38 item 3: 1.27x per group at 20,000 against 6,000)."""

from __future__ import annotations

import struct

import pytest

from kafkatxn.kafka.wire import group_answers
from kafkatxn.kafka.wire.answer_memo import BlockMemo

PARTITIONS_PER_GROUP = 20
COORDINATORS = 6  # bench_sizes' brokers: each answers its groups' OffsetFetch


def _compact(text: str) -> bytes:
    raw = text.encode()
    assert len(raw) + 1 < 0x80
    return bytes([len(raw) + 1]) + raw


def offset_fetch_answer(groups: range) -> bytes:
    """A batched OffsetFetch answer (v8, flexible) of bench_sizes' groups: each commits on 20
    consecutive partitions of one topic (no metadata, no error)."""
    out = [struct.pack(">i", 0)]
    count = len(groups) + 1
    varint = bytearray()
    while count >= 0x80:
        varint.append(count & 0x7F | 0x80)
        count >>= 7
    varint.append(count)
    out.append(bytes(varint))
    for g in groups:
        topic, first = divmod(g, 5)
        out.append(_compact(f"bench-sizes-group-{g:06d}"))
        out.append(b"\x02")  # one topic
        out.append(_compact(f"bench-sizes-{topic:05d}"))
        out.append(bytes([PARTITIONS_PER_GROUP + 1]))
        for i in range(first * PARTITIONS_PER_GROUP, (first + 1) * PARTITIONS_PER_GROUP):
            out.append(struct.pack(">iqi", i, 5 + i % 7, -1) + b"\x01" + struct.pack(">h", 0) + b"\x00")
        out.append(b"\x00")  # the topic's tagged fields
        out.append(struct.pack(">h", 0) + b"\x00")  # the group's error, tagged fields
    out.append(b"\x00")
    return b"".join(out)


def kept_share(groups: int) -> float:
    """Of the groups read in a scrape after a first one (the same answers, a quiet cluster), the share
    found in the memo (read before: the same object again)."""
    answers = [offset_fetch_answer(range(c, groups, COORDINATORS)) for c in range(COORDINATORS)]
    first = [group_answers.read_offset_fetch(memoryview(raw), 8)[0].groups for raw in answers]
    again = [group_answers.read_offset_fetch(memoryview(raw), 8)[0].groups for raw in answers]
    assert again == first
    found = sum(a is b for before, now in zip(first, again) for a, b in zip(before, now))
    return found / groups


@pytest.mark.parametrize("groups", [6_000, 20_000])
def test_a_quiet_clusters_groups_are_found_again_at_every_size_the_benchmarks_measure(groups, monkeypatch):
    monkeypatch.setattr(group_answers, "MEMO", BlockMemo(group_answers.MEMO.limit))
    assert kept_share(groups) == 1.0
