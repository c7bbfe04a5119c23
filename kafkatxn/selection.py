"""Which partitions a command is about: the user's topics, partition and pattern, checked against
the cluster's metadata. Above the Kafka layer: it decides nothing about Kafka and sends nothing."""

from __future__ import annotations

from collections import defaultdict
from itertools import compress
from operator import itemgetter, not_
from typing import Iterable

from kafkatxn.errors import InputError, NotFoundError
from kafkatxn.metadata_columns import ColumnMetadata
from kafkatxn.model import ClusterMetadata, InTopicOrder, PartitionInfo, TopicPartition, in_partition_order, is_in_partition_order, topic_partitions
from kafkatxn.validation import check_topic_name, compile_regex

_INTERNAL, _LEADER = itemgetter(5), itemgetter(2)  # of a PartitionInfo: whether its topic is internal, its leader


def check_selection(topics: Iterable[str] | None = None, partition: int | None = None, topic_pattern: str | None = None) -> None:
    """What can be judged without the cluster, judged first: a usage error sends nothing."""
    topics = list(topics or [])
    if partition is not None and len(topics) != 1:
        raise InputError("{partition} needs exactly one {topic}")
    for t in topics:
        check_topic_name(t)
    if topic_pattern:
        compile_regex(topic_pattern, "topic")


def select_partitions(
    metadata: ClusterMetadata,
    topics: Iterable[str] | None = None,
    partition: int | None = None,
    include_internal: bool = False,
    topic_pattern: str | None = None,
) -> list[PartitionInfo]:
    """Partitions named by the user; unknown topics or partitions raise :class:`NotFoundError`."""
    topics = list(topics or [])
    check_selection(topics, partition, topic_pattern)
    rx = compile_regex(topic_pattern, "topic") if topic_pattern else None
    if topics:
        by_topic: dict[str, list[PartitionInfo]] = defaultdict(list)
        for p in metadata.partitions:
            by_topic[p.topic].append(p)
        unknown = [t for t in topics if t not in by_topic]
        if unknown:
            raise NotFoundError(f"unknown topic {', '.join(repr(t) for t in unknown)}")
        chosen = [p for t in dict.fromkeys(topics) for p in by_topic[t]]
        if partition is not None:
            chosen = [p for p in chosen if p.partition == partition]
            if not chosen:
                count = len(by_topic[topics[0]])
                raise NotFoundError(f"topic {topics[0]!r} has no partition {partition} (it has {count}: 0-{count - 1})")
    elif include_internal:
        chosen = list(metadata.partitions)
    else:  # every partition but the internal topics', found in C (30,000 and more)
        chosen = list(compress(metadata.partitions, map(not_, map(_INTERNAL, metadata.partitions))))
    if rx is not None:
        chosen = [p for p in chosen if rx.search(p.topic)]
    return chosen


def select_in_partition_order(
    metadata: ClusterMetadata, topics: Iterable[str] | None = None
) -> tuple[list[TopicPartition], list[int] | None]:
    """The TopicPartitions :func:`select_partitions` chooses (no internal topic's), in partition order and
    each once, and beside them their leaders (-1: none), or None where they were put in order here.
    Every partition but the internal topics' (no ``topics``, most often) is the metadata's own
    TopicPartitions and leaders, picked in C: already in that order (checked), nothing made, sorted
    or looked up by hand again (30,000 partitions and more)."""
    topics = list(topics or [])
    if not topics and type(metadata) is ColumnMetadata:  # the metadata's columns, a topic at a time
        return metadata.data_partitions()
    if not topics:
        partitions = metadata.partitions
        chosen = list(map(not_, map(_INTERNAL, partitions)))
        tps = list(compress(metadata.tps, chosen))
        if type(partitions) is InTopicOrder or is_in_partition_order(tps):  # the former: ordered where read
            return tps, list(compress(map(_LEADER, partitions), chosen))
        return in_partition_order(tps), None
    return in_partition_order(topic_partitions(select_partitions(metadata, topics))), None
