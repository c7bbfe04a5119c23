"""DescribeProducers answers read from their bytes (kafkatxn/kafka/wire/producers_answers.py) in runs of
alike partitions, and kept by their bytes: each compared with the wire's decoder over kafka-python's."""

from __future__ import annotations

import random
import struct

import pytest

from kafkatxn.kafka import protocol as p
from kafkatxn.kafka.wire import producers_answers
from kafkatxn.kafka.wire.answer_memo import BlockMemo
from kafkatxn.kafka.wire.producers_codec import _decode_describe_producers


def answer(counts: list[list[int]], messages: frozenset[tuple[int, int]] = frozenset(), seed: int = 0) -> bytes:
    """kafka-python's DescribeProducers answer (v0): topic t's partition i with ``counts[t][i]`` producers,
    an error and its message where ``(t, i)`` is in ``messages``."""
    from kafka.protocol.admin.transactions import DescribeProducersResponse as R

    rnd = random.Random(seed)
    T = R.TopicResponse
    P = T.PartitionResponse

    def producers(k: int) -> list:
        return [P.ProducerState(producer_id=rnd.randrange(1 << 40), producer_epoch=rnd.randrange(100), last_sequence=rnd.randrange(-1, 1000),
                                last_timestamp=1_700_000_000_000 + rnd.randrange(10**6), coordinator_epoch=rnd.choice((-1, 0, 7)),
                                current_txn_start_offset=rnd.choice((-1, rnd.randrange(1 << 33)))) for _ in range(k)]

    topics = [T(name=f"topic-{t}", partitions=[
        P(partition_index=i, error_code=6 if (t, i) in messages else 0, error_message="moved" if (t, i) in messages else None,
          active_producers=producers(k)) for i, k in enumerate(row)]) for t, row in enumerate(counts)]
    return bytes(R(throttle_time_ms=3, topics=topics).encode(version=0))


def decoded(raw: bytes) -> p.DescribeProducersResponse:
    from kafka.protocol.admin.transactions import DescribeProducersResponse as R

    return _decode_describe_producers(p.DescribeProducers(()), R.decode(raw, version=0))


@pytest.fixture(autouse=True)
def fresh_memo(monkeypatch):
    monkeypatch.setattr(producers_answers, "MEMO", BlockMemo(producers_answers.MEMO.limit))


SHAPES = {
    "none": [[0] * 50, [0] * 3],
    "one": [[1] * 40],
    "mostly none, a few with producers": [[0] * 20 + [1] + [0] * 30 + [2, 2] + [0] * 10, [0, 3, 0]],
    "alternating": [[i % 2 for i in range(60)], [i % 3 for i in range(31)]],
    "one partition": [[5], [0]],
    "a run longer than one struct holds": [[1] * (producers_answers._RUN_LONGEST + 7) + [0] * 5],
}


@pytest.mark.parametrize("shape", SHAPES)
def test_runs_of_alike_partitions_read_as_the_decoder_reads_them(shape, monkeypatch):
    raw = answer(SHAPES[shape], seed=len(shape))
    monkeypatch.setattr(producers_answers, "_one_by_one", None)  # no partition read one at a time
    assert producers_answers.read_describe_producers(memoryview(raw), 0) == (decoded(raw), 3)


def _no_producers_topic(numbers: list[int], errors: dict[int, int] = {}) -> bytes:  # noqa: B006 - read only
    """An answer of one topic whose partitions have no producer, numbered ``numbers``, with error codes (no
    message) ``errors`` by position: kafka-python's encoding, its records' numbers and error codes written over."""
    raw = bytearray(answer([[0] * len(numbers)]))
    first = 4 + 1 + 1 + len("topic-0") + 1  # throttle, topics, the name, the partitions' count
    for k, number in enumerate(numbers):
        raw[first + 9 * k : first + 9 * k + 6] = struct.pack(">ih", number, errors.get(k, 0))
    return bytes(raw)


@pytest.mark.parametrize("numbers, errors", [
    ([0, 1, 2, 3], {}),
    ([7, 2, 30, 5, 6], {}),  # a leader's few of a topic, in any order
    ([0, 1, 2, 3], {2: 6}),  # an error without a message: not a partition without producers to skip over
    ([4, 9], {0: 29, 1: 6}),
])
def test_a_topic_whose_partitions_have_no_producer_is_read_as_the_decoder_reads_it(numbers, errors):
    raw = _no_producers_topic(numbers, errors)
    got = producers_answers.read_describe_producers(memoryview(raw), 0)
    assert got == (decoded(raw), 3)
    assert [(x.tp.partition, x.error, x.producers) for x in got[0].partitions] == [
        (n, {6: "NOT_LEADER_OR_FOLLOWER", 29: "TOPIC_AUTHORIZATION_FAILED"}.get(errors.get(k)), ()) for k, n in enumerate(numbers)]


def test_a_partition_with_an_error_message_is_read_with_the_rest_of_its_topic_one_at_a_time():
    counts = [[0] * 10 + [1] * 10, [2] * 5, [0] * 7]
    raw = answer(counts, frozenset({(0, 12), (2, 0)}))
    got = producers_answers.read_describe_producers(memoryview(raw), 0)
    assert got == (decoded(raw), 3)
    assert [x.error for x in got[0].partitions].count("NOT_LEADER_OR_FOLLOWER") == 2


def test_the_same_bytes_again_are_the_same_partitions_again_and_other_bytes_are_read_anew(monkeypatch):
    raw = answer([[1] * 30, [0] * 30])
    first = producers_answers.read_describe_producers(memoryview(raw), 0)[0].partitions
    read_anew = []
    read_runs = producers_answers._read_runs
    monkeypatch.setattr(producers_answers, "_read_runs", lambda data, runs, name: read_anew.append(name) or read_runs(data, runs, name))
    again = producers_answers.read_describe_producers(memoryview(bytes(raw)), 0)[0].partitions
    assert again == first and not read_anew and all(a is b for a, b in zip(again.columns[2], first.columns[2]))
    # One producer's LastSequence moves on: that topic is read anew, the other taken as it was.
    changed = answer([[1] * 30, [0] * 30], seed=1)
    moved = producers_answers.read_describe_producers(memoryview(changed), 0)[0].partitions
    assert moved == decoded(changed).partitions != first
    assert read_anew == ["topic-0"] and moved.columns[2][0] is not first.columns[2][0]


def test_the_memo_keeps_what_was_used_lately_within_its_bound():
    memo = BlockMemo(20)  # generations of 10 at most
    for key in "abc":
        memo.put(key, key.upper(), 4)  # c takes the new generation past 10: a, b, c the old one
    assert [memo.get(k) for k in "ab"] == ["A", "B"] and memo.held == 12  # a and b new again
    for key in "de":
        memo.put(key, key.upper(), 4)  # a, b, d past 10: the old one; c, not used since, let go
    assert [memo.get(k) for k in "dec"] == ["D", "E", None]
    for n in range(100):  # as many scrapes of changing bytes: never past the bound
        memo.put(n, n, 3)
        assert memo.held <= 20
    memo.put("big", 0, 11)  # more than a generation alone: not kept
    assert memo.get("big") is None


def test_an_answer_with_tagged_fields_in_a_partition_is_left_to_kafka_python():
    raw = bytearray(answer([[0] * 5]))
    # The last partition's tagged-field count (the byte before the topic's and the answer's): one tag.
    assert raw[-3:] == b"\x00\x00\x00"
    tagged = bytes(raw[:-3]) + b"\x01\x09\x01\x07\x00\x00"
    assert producers_answers.read_describe_producers(memoryview(tagged), 0) is None
