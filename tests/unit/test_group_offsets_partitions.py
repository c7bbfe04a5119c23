"""facts_lso.group_offsets_partitions keeps each group's __consumer_offsets partition per partition count
(the exporter asks the same groups every scrape): what it answers is always offsets_partition's, whatever
it kept from earlier calls, another partition count's included; Spark queries (QueryReader) have none."""

from __future__ import annotations

from types import SimpleNamespace

from kafkatxn import facts_lso
from kafkatxn.model import PartitionInfo, QueryReader, TopicPartition
from kafkatxn.verdicts_groups import CONSUMER_OFFSETS_TOPIC, offsets_partition


def _cluster(offsets_partitions: int) -> SimpleNamespace:
    parts = [PartitionInfo("orders", p, 1, (1,), (1,)) for p in range(3)]
    parts += [PartitionInfo(CONSUMER_OFFSETS_TOPIC, p, 1, (1,), (1,), True) for p in range(offsets_partitions)]
    return SimpleNamespace(metadata=lambda: SimpleNamespace(partitions=parts))


def _expected(groups, count):
    return {g: TopicPartition(CONSUMER_OFFSETS_TOPIC, offsets_partition(g, count)) for g in groups if not isinstance(g, QueryReader)}


def test_each_groups_partition_is_offsets_partitions_whatever_was_kept(monkeypatch):
    monkeypatch.setattr(facts_lso, "_OFFSETS_PARTITIONS", {})
    groups = [f"group-{i}" for i in range(300)] + ["", "é-ünïcode", "\ud800lone"]
    query = QueryReader("q", "id", "/checkpoints/q")
    for count, asked in ((50, groups[:100]), (50, groups), (7, groups[50:]), (50, [*groups[::3], query]), (50, groups)):
        assert facts_lso.group_offsets_partitions(_cluster(count), asked) == _expected(asked, count)
        assert facts_lso.group_offsets_partitions(_cluster(count), asked) == _expected(asked, count)  # from what was kept


def test_no_offsets_topic_no_partitions_and_the_kept_names_are_bounded(monkeypatch):
    monkeypatch.setattr(facts_lso, "_OFFSETS_PARTITIONS", {})
    assert facts_lso.group_offsets_partitions(_cluster(0), ["a", "b"]) == {}
    monkeypatch.setattr(facts_lso, "_KEPT_GROUPS", 10)
    for start in range(0, 100, 20):
        asked = [f"g{i}" for i in range(start, start + 20)]
        assert facts_lso.group_offsets_partitions(_cluster(50), asked) == _expected(asked, 50)
        assert sum(map(len, facts_lso._OFFSETS_PARTITIONS.values())) <= 20
