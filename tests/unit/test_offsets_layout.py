"""ListOffsets answers read by wire/offsets_layout.py: walked a topic head at a time, their columns taken
out in C, and an answer laid out as one read before read by that one's layout. Each is compared with
what kafka-python's own decoder makes of the same bytes, whatever order the broker put the topics
and partitions in (a broker's hash maps decide it, not the request)."""

from __future__ import annotations

import random

import pytest
from kafka.protocol.consumer.offsets import ListOffsetsResponse as R

from kafkatxn.kafka.wire import offsets_layout
from kafkatxn import model
from kafkatxn.model import TopicPartition, kept_topic_partitions

T = R.ListOffsetsTopicResponse
P = T.ListOffsetsPartitionResponse


@pytest.fixture(autouse=True)
def no_layouts_kept(monkeypatch):
    monkeypatch.setattr(offsets_layout, "_layouts", type(offsets_layout._layouts)())


def answer(topics: list[tuple[str, list[tuple[int, int, int]]]], throttle_ms: int = 0, version: int = 9) -> memoryview:
    """The bytes of a ListOffsets answer's body: per topic, (partition, error code, offset) rows, in this order."""
    encoded = R(throttle_time_ms=throttle_ms, topics=[
        T(name=name, partitions=[P(partition_index=i, error_code=e, timestamp=-1, offset=o, leader_epoch=7) for i, e, o in rows])
        for name, rows in topics
    ]).encode(version=version)
    return memoryview(bytearray(encoded))  # as kafka-python's parser hands a frame over: its own buffer


def kafka_pythons(data: memoryview, version: int = 9) -> tuple[list[TopicPartition], list[int], list[int], int]:
    decoded = R.decode(bytes(data), version=version)
    rows = [(TopicPartition(t.name, q.partition_index), q.error_code, q.offset) for t in decoded.topics for q in t.partitions]
    return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], decoded.throttle_time_ms


def random_topics(rng: random.Random) -> list[tuple[str, list[tuple[int, int, int]]]]:
    topics = []
    for t in rng.sample(range(10_000), rng.randint(0, 40)):
        name = f"t{t}-" + "x" * rng.choice((0, 3, 130))  # a name of 128 bytes or more: a two-byte length
        count = rng.choice((0, 1, 3, 126, 127, 300))  # 127 and more: a two-byte count
        indexes = rng.sample(range(1_000), count)  # in the broker's order, not the request's
        topics.append((name, [(i, rng.choice((0, 0, 0, 6, 3)), rng.choice((-1, 0, 5, 2**40, 2**63 - 1))) for i in indexes]))
    return topics


@pytest.mark.parametrize("seed", range(40))
def test_an_answer_is_read_as_kafka_pythons_decoder_reads_it(seed):
    rng = random.Random(seed)
    data = answer(random_topics(rng), throttle_ms=rng.choice((0, 17, 2**31 - 1)))
    tps, codes, offsets, throttle_ms = offsets_layout.read(data)
    assert (list(tps), codes, offsets, throttle_ms) == kafka_pythons(data)
    again = offsets_layout.read(data)  # by the layout kept
    assert again[0] is tps and again[1:] == (codes, offsets, throttle_ms)


def test_an_answer_laid_out_alike_is_read_by_the_layout_and_another_is_walked(monkeypatch):
    walked = []
    walk = offsets_layout._walked
    monkeypatch.setattr(offsets_layout, "_walked", lambda data: walked.append(bytes(data)) or walk(data))
    topics = [("orders", [(3, 0, 30), (0, 0, 10), (7, 0, 70)]), ("payments", [(1, 0, 5)])]
    first = offsets_layout.read(answer(topics))
    # Other offsets, an error and another throttle time: the same layout.
    other = [("orders", [(3, 0, 31), (0, 6, -1), (7, 0, 70)]), ("payments", [(1, 0, 9)])]
    data = answer(other, throttle_ms=20)
    read = offsets_layout.read(data)
    assert len(walked) == 1 and read[0] is first[0]
    assert (list(read[0]), *read[1:]) == kafka_pythons(data)
    # The same length, laid out otherwise: partition numbers swapped, a topic of the same length renamed,
    # partitions moved from one topic to another, the topics in another order.
    for moved in (
        [("orders", [(0, 0, 30), (3, 0, 10), (7, 0, 70)]), ("payments", [(1, 0, 5)])],
        [("orders", [(3, 0, 30), (0, 0, 10), (7, 0, 70)]), ("pay_ents", [(1, 0, 5)])],
        [("payments", [(1, 0, 5)]), ("orders", [(3, 0, 30), (0, 0, 10), (7, 0, 70)])],
        [("orders", [(3, 0, 30), (0, 0, 10)]), ("paymenxy", [(1, 0, 5), (2, 0, 5)])],
    ):
        data = answer(moved)
        assert len(data) == len(answer(topics))
        read = offsets_layout.read(data)
        assert (list(read[0]), *read[1:]) == kafka_pythons(data)
    assert len(walked) == 5


def test_an_answer_with_tagged_fields_or_that_is_no_answer_is_not_read():
    plain = bytes(answer([("orders", [(0, 0, 42)])], version=11))
    assert offsets_layout.read(memoryview(plain)) is not None
    end = plain.index(b"\x00\x00\x00\x07") + 4  # after the partition's leader epoch 7: its tagged-field count
    tagged = plain[:end] + b"\x01\x09\x01\x07" + plain[end + 1 :]  # one unknown tag (9) of 1 byte
    assert R.decode(tagged, version=11).topics[0].partitions[0].offset == 42  # what kafka-python reads
    assert offsets_layout.read(memoryview(tagged)) is None
    topic_tagged = plain[:end + 1] + b"\x01\x09\x00" + plain[end + 2 :]  # the topic's tagged fields: tag 9, empty
    assert R.decode(topic_tagged, version=11).topics[0].name == "orders"
    assert offsets_layout.read(memoryview(topic_tagged)) is None
    not_utf8 = plain.replace(b"orders", b"order\xff")
    at = plain.index(b"orders")
    null_name = plain[: at - 1] + b"\x00" + plain[at + 6 :]  # the name's length varint 0: null, and no name
    null_partitions = plain[: at + 6] + b"\x00" + plain[at + 7 :]  # the partitions' count varint 0: null
    for broken in (plain[:-1], plain[:-2], plain + b"\x00", plain[:9], b"", plain[:4] + b"\xff" * 12, not_utf8, null_name, null_partitions):
        assert offsets_layout.read(memoryview(broken)) is None


def test_a_column_is_each_records_big_endian_field():
    rows = [(i, e, o) for i, e, o in [(0, 0, 0), (2**31 - 1, -1, -(2**63)), (-5, 32767, 2**63 - 1), (7, -32768, -1)]]
    data = answer([("t", rows)])
    read = offsets_layout.read(data)
    assert [tp.partition for tp in read[0]] == [r[0] for r in rows] and read[1] == [r[1] for r in rows] and read[2] == [r[2] for r in rows]


def test_layouts_kept_hold_at_most_their_bound_of_partitions(monkeypatch):
    monkeypatch.setattr(offsets_layout, "LAYOUT_PARTITIONS_KEPT", 250)
    for n in range(1, 8):  # answers of 100 partitions, each laid out otherwise (another length)
        offsets_layout.read(answer([("t" * n, [(i, 0, i) for i in range(100)])]))
        held = sum(len(layout.indexes) for same in offsets_layout._layouts.values() for layout in same)
        assert held <= 250 and held == offsets_layout._held[0]
    assert [len(k) for k in [next(iter(same)).partitions[0].topic for same in offsets_layout._layouts.values()]] == [6, 7]
    too_big = answer([("big", [(i, 0, i) for i in range(300)])])
    assert offsets_layout.read(too_big) is not None and len(offsets_layout._layouts) == 2  # read, not kept


def test_an_answer_of_large_topics_names_the_kept_topic_partitions_and_one_of_small_topics_new_ones(monkeypatch):
    # The metadata's routing and a ListOffsets answer of topics of many partitions share their TopicPartitions:
    # 30,000 made once a pass at 30,000 partitions, not once by each. Many small topics are made apart (cheaper).
    monkeypatch.setattr(model, "_kept", {})
    large = [(f"large-{t}", [(i, 0, 5) for i in random.Random(t).sample(range(200), 40)]) for t in range(3)]
    data = answer(large)
    tps = offsets_layout.read(data)[0]
    assert list(tps) == kafka_pythons(data)[0]
    assert all(tp is next(kept_topic_partitions(tp.topic, [tp.partition])) for tp in tps)
    routed = list(kept_topic_partitions("large-0", list(range(200))))  # as the metadata's routing asks a whole topic
    assert set(map(id, tps[:40])) <= set(map(id, routed))

    small = [(f"small-{t}", [(3, 0, 5), (1, 6, -1)]) for t in range(30)]
    data = answer(small)
    tps = offsets_layout.read(data)[0]
    assert list(tps) == kafka_pythons(data)[0]
    assert "small-0" not in model._kept  # none kept for an answer of small topics
