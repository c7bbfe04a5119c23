"""model.topic_partitions and kept_topic_partitions: the kept TopicPartitions, whatever the order given."""

from kafkatxn import model
from kafkatxn.model import PartitionInfo, TopicPartition, kept_topic_partitions, topic_partitions


def infos(*places: tuple[str, int]) -> list[PartitionInfo]:
    return [PartitionInfo(topic, index, 1, (1,), (1,)) for topic, index in places]


def test_each_partitions_kept_topic_partition_in_the_order_given(monkeypatch):
    monkeypatch.setattr(model, "_kept", {})
    monkeypatch.setattr(model, "_kept_count", 0)
    orders = [
        infos(("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1)),  # metadata's order: every partition
        infos(("a", 1), ("a", 2), ("b", 0)),  # a subset
        infos(("b", 0), ("a", 0), ("a", 1), ("b", 1), ("a", 2)),  # topics not sorted, a topic in two runs
        infos(("a", 2), ("a", 0), ("a", 1)),  # a run not in partition order
        infos(("a", 0), ("a", 0), ("c", 0), ("c", 3)),  # twice, and a gap
        infos(("d", -1), ("d", 0)),  # not a partition number to keep
        [],
    ]
    for parts in orders:
        made = topic_partitions(parts)
        assert made == [TopicPartition(p.topic, p.partition) for p in parts]
        assert all(type(tp) is TopicPartition for tp in made)
        assert topic_partitions(iter(parts)) == made and topic_partitions(tuple(parts)) == made
    # Kept: a topic's every partition is the same objects as any of them asked alone.
    every = topic_partitions(infos(("a", 0), ("a", 1), ("a", 2)))
    assert [next(kept_topic_partitions("a", [i])) for i in range(3)] == every
    assert all(tp is next(kept_topic_partitions("a", [i])) for i, tp in enumerate(every))


def test_a_topics_every_partition_grows_the_kept_ones_past_the_last_asked(monkeypatch):
    monkeypatch.setattr(model, "_kept", {})
    monkeypatch.setattr(model, "_kept_count", 0)
    assert list(kept_topic_partitions("t", [0, 1])) == [TopicPartition("t", 0), TopicPartition("t", 1)]
    longer = list(kept_topic_partitions("t", [0, 1, 2, 3]))
    assert longer == [TopicPartition("t", i) for i in range(4)] and len(model._kept["t"]) == 4
    assert list(kept_topic_partitions("t", (0, 1, 2))) == longer[:3]  # a tuple: looked up one by one
    monkeypatch.setattr(model, "KEPT_PARTITIONS_LIMIT", 3)
    assert list(kept_topic_partitions("u", [0, 1, 2, 3])) == [TopicPartition("u", i) for i in range(4)] and "u" not in model._kept


def test_partitions_in_topic_order_carry_their_topic_partitions_to_the_metadata_and_its_copies():
    """What the wire reads a Metadata answer into (``InTopicOrder``): the ClusterMetadata's TopicPartitions
    are the ones made with it, not made again; a copy (pickle, copy) keeps them, as they were made."""
    import copy
    import pickle

    from kafkatxn.model import ClusterMetadata, InTopicOrder

    parts = infos(("a", 0), ("a", 1), ("b", 0))
    tps = topic_partitions(parts)
    ordered = InTopicOrder(parts, tps)
    assert ordered == tuple(parts) and ordered.tps is tps
    assert ClusterMetadata("c", 1, (), ordered).tps is tps
    for again in (pickle.loads(pickle.dumps(ordered)), copy.copy(ordered), copy.deepcopy(ordered)):
        assert type(again) is InTopicOrder and again == ordered and again.tps == tps
    assert InTopicOrder(parts).tps == tps  # made here where not given
